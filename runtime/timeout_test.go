package runtime_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hirlab/hir/runtime"
)

func TestTimeoutError(t *testing.T) {
	for _, c := range []struct {
		e    *runtime.TimeoutError
		want string
	}{
		{&runtime.TimeoutError{What: "barrier #2", After: 300 * time.Millisecond, Missing: []int{1}, Arrived: []int{0}},
			"barrier #2: timed out after 300ms waiting for rank 1 (arrived: 0)"},
		{&runtime.TimeoutError{What: "all_gather #0", After: 4999871234 * time.Nanosecond, Missing: []int{2, 3}, Awaited: "a data signal"},
			"all_gather #0: timed out after 5s waiting for a data signal from ranks 2, 3"},
		// under a microsecond, whole: not "0s"
		{&runtime.TimeoutError{What: "symmetric alloc #0", After: time.Nanosecond, Missing: []int{1}},
			"symmetric alloc #0: timed out after 1ns waiting for rank 1"},
		{&runtime.TimeoutError{What: "barrier #0", After: 1500 * time.Nanosecond, Missing: []int{1}},
			"barrier #0: timed out after 2µs waiting for rank 1"},
	} {
		assert.Equal(t, c.want, c.e.Error())
		err := fmt.Errorf("rank 0: %w", c.e)
		var te *runtime.TimeoutError
		if assert.ErrorAs(t, err, &te, "errors.As does not find %v", c.e) {
			assert.Same(t, c.e, te, "errors.As finds another error than %v", c.e)
		}
		assert.ErrorIs(t, err, runtime.ErrTimeout, "errors.Is does not find ErrTimeout in %v", c.e)
	}
}

// Without the sim package imported (this test binary does not), opening
// "sim" says how to register it.
func TestOpenSimWithoutImportSaysHow(t *testing.T) {
	_, err := runtime.Open("sim", runtime.Config{WorldSize: 1})
	assert.ErrorIs(t, err, runtime.ErrUnknownBackend)
	assert.ErrorContains(t, err, `import _ "github.com/hirlab/hir/runtime/sim"`)
}
