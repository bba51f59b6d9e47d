package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/runtime"
)

// The store's timeouts read as the *runtime.TimeoutError every runtime's
// timeouts share; a barrier a rank left by dying does not.
func TestTimeoutsReadAsRuntimeTimeouts(t *testing.T) {
	var te *runtime.TimeoutError
	err := fmt.Errorf("x: %w", &BarrierError{Name: "b", World: 3, Missing: []int{1, 2}, After: time.Second})
	require.ErrorAs(t, err, &te)
	require.Equal(t, `barrier "b"`, te.What)
	require.Equal(t, time.Second, te.After)
	require.Equal(t, "[1 2]", fmt.Sprint(te.Missing))
	assert.Equal(t, `barrier "b": timed out after 1s waiting for ranks 1, 2`, te.Error())
	te = nil
	assert.NotErrorAs(t, &BarrierError{Name: "b", World: 2, Missing: []int{1}, Disconnected: []int{1}}, &te, "a disconnected rank read as a timeout")
	err = &TimeoutError{Op: "get", Missing: []string{"nccl/id"}, Total: 1, After: 5 * time.Second}
	require.ErrorAs(t, err, &te, "a get timeout does not read as a runtime.TimeoutError")
	require.ErrorIs(t, te, runtime.ErrTimeout, "a get timeout does not read as a runtime.TimeoutError")
	assert.Equal(t, `store get: timed out after 5s waiting for key "nccl/id"`, te.Error())
}
