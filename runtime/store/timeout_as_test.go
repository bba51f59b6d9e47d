package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hirlab/hir/runtime"
)

// The store's timeouts read as the *runtime.TimeoutError every runtime's
// timeouts share; a barrier a rank left by dying does not.
func TestTimeoutsReadAsRuntimeTimeouts(t *testing.T) {
	var te *runtime.TimeoutError
	err := fmt.Errorf("x: %w", &BarrierError{Name: "b", World: 3, Missing: []int{1, 2}, After: time.Second})
	if !errors.As(err, &te) || te.What != `barrier "b"` || te.After != time.Second || fmt.Sprint(te.Missing) != "[1 2]" {
		t.Fatalf("errors.As = %v, %+v", errors.As(err, &te), te)
	}
	if got, want := te.Error(), `barrier "b": timed out after 1s waiting for ranks 1, 2`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	te = nil
	if errors.As(&BarrierError{Name: "b", World: 2, Missing: []int{1}, Disconnected: []int{1}}, &te) {
		t.Errorf("a disconnected rank read as a timeout: %v", te)
	}
	err = &TimeoutError{Op: "get", Missing: []string{"nccl/id"}, Total: 1, After: 5 * time.Second}
	if !errors.As(err, &te) || !errors.Is(te, runtime.ErrTimeout) {
		t.Fatalf("a get timeout does not read as a runtime.TimeoutError")
	}
	if got, want := te.Error(), `store get: timed out after 5s waiting for key "nccl/id"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
