package gpu

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCachedImageCompilesOnce: callers that want the same image while it
// compiles (a collective's first launch while WarmCollectives compiles its
// module in the background) share one NVRTC run and all get its image; a
// failed run is every waiter's error, and the next caller compiles anew.
func TestCachedImageCompilesOnce(t *testing.T) {
	t.Setenv(EnvKernelCache, "off")
	var runs atomic.Int32
	fail := atomic.Bool{}
	saved := compileImage
	t.Cleanup(func() { compileImage = saved })
	compileImage = func(src, name string, cc [2]int, opts ...string) ([]byte, error) {
		runs.Add(1)
		time.Sleep(200 * time.Millisecond) // every caller arrives while it runs
		if fail.Load() {
			return nil, assert.AnError
		}
		return append(append([]byte(nil), ElfMagic...), src...), nil
	}
	get := func(key string) (imgs [][]byte, errs []error) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				img, _, err := CachedImage(key, "src-"+key, "k.cu", [2]int{9, 0}, nil, false)
				mu.Lock()
				imgs, errs = append(imgs, img), append(errs, err)
				mu.Unlock()
			}()
		}
		wg.Wait()
		return imgs, errs
	}

	fail.Store(true)
	_, errs := get("test-compiles-once-failing")
	assert.EqualValues(t, 1, runs.Load(), "one NVRTC run for six callers")
	for _, err := range errs {
		assert.ErrorIs(t, err, assert.AnError)
	}

	fail.Store(false)
	runs.Store(0)
	imgs, errs := get("test-compiles-once-failing")
	assert.EqualValues(t, 1, runs.Load(), "a failed run is not remembered: the next callers compile (once)")
	for i := range imgs {
		require.NoError(t, errs[i])
		assert.Equal(t, append(append([]byte(nil), ElfMagic...), "src-test-compiles-once-failing"...), imgs[i])
	}
	images.mu.Lock()
	delete(images.m, "test-compiles-once-failing")
	images.mu.Unlock()
}
