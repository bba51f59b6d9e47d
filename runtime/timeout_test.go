package runtime_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

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
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got %s, want %s", got, c.want)
		}
		err := fmt.Errorf("rank 0: %w", c.e)
		var te *runtime.TimeoutError
		if !errors.As(err, &te) || te != c.e || !errors.Is(err, runtime.ErrTimeout) {
			t.Errorf("errors.As/Is do not find %v", c.e)
		}
	}
}

// Without the sim package imported (this test binary does not), opening
// "sim" says how to register it.
func TestOpenSimWithoutImportSaysHow(t *testing.T) {
	_, err := runtime.Open("sim", runtime.Config{WorldSize: 1})
	if !errors.Is(err, runtime.ErrUnknownBackend) || !strings.Contains(err.Error(), `import _ "github.com/hirlab/hir/runtime/sim"`) {
		t.Errorf("got %v", err)
	}
}
