package cuda

import (
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Sizes in error messages (a tensor too large for the device) read as a
// person would say them.
func TestHumanSizes(t *testing.T) {
	for n, want := range map[uint64]string{100: "100 B", 3 << 20: "3.00 MiB", 141 << 30: "141.00 GiB", 1 << 50: "1.00 PiB", 5 << 40: "5.00 TiB"} {
		assert.Equal(t, want, gpu.Human(n), "human(%d)", n)
	}
}
