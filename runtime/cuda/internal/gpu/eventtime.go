package gpu

import (
	"fmt"
	"time"

	"github.com/hirlab/hir/runtime"
)

var _ runtime.EventTimer = (*Device)(nil)

// Elapsed is the GPU time between two completed events of this device
// (cuEventElapsedTime: about half a microsecond of resolution).
func (d *Device) Elapsed(start, end runtime.Event) (time.Duration, error) {
	ms, err := ElapsedMillis(start, end)
	if err != nil {
		return 0, fmt.Errorf("cuda: rank %d: elapsed: %w", d.Opts.Rank, err)
	}
	return time.Duration(float64(ms) * 1e6), nil
}
