package dl

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenMissingLibraryFails(t *testing.T) {
	_, err := Open("/nonexistent/libcuda.so.1")
	require.Error(t, err, "a missing library opened")
	if runtime.GOOS != "linux" {
		assert.ErrorIs(t, err, ErrNeedsLinux, "off linux")
	}
}

// On linux, libc stands in for an NVIDIA library: open, look up, close.
func TestOpenSymClose(t *testing.T) {
	if runtime.GOOS != "linux" {
		_, err := Sym(0, "sched_yield")
		assert.ErrorIs(t, err, ErrNeedsLinux, "Sym off linux")
		t.Skip("NVIDIA's libraries are loaded on linux only")
	}
	h, err := Open("libc.so.6")
	if err != nil {
		t.Skipf("libc does not load here: %v", err)
	}
	p, err := Sym(h, "sched_yield")
	require.NoError(t, err, "Sym")
	assert.NotZero(t, p, "sched_yield's address")
	_, err = Sym(h, "cuNoSuchEntryPoint")
	assert.Error(t, err, "a symbol nobody exports")
	assert.NoError(t, Close(h), "Close")
}
