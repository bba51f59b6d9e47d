package cuda

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorNames(t *testing.T) {
	cases := map[Result]string{
		0: "CUDA_SUCCESS", 2: "CUDA_ERROR_OUT_OF_MEMORY", 100: "CUDA_ERROR_NO_DEVICE",
		600: "CUDA_ERROR_NOT_READY", 801: "CUDA_ERROR_NOT_SUPPORTED", 12345: "CUresult(12345)",
	}
	for code, want := range cases {
		if got := resultName(code); got != want {
			t.Errorf("resultName(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestErrorMessageNamesCallAndCode(t *testing.T) {
	e := &Error{Call: "cuMemCreate", Code: errOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY", Desc: "out of memory"}
	if got, want := e.Error(), "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("alloc: %w", e)
	if !IsResult(wrapped, errOutOfMemory) || IsResult(wrapped, errNoDevice) {
		t.Error("IsResult does not see through wrapping")
	}
	if err := unsupported("collectives (all_gather)"); !errors.Is(err, ErrUnsupported) ||
		err.Error() != "unsupported on cuda yet: collectives (all_gather)" {
		t.Errorf("unsupported: %v", err)
	}
}
