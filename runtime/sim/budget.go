package sim

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// memoryBudget is the CPU runtime's stand-in for a GPU's memory: all ranks
// of a runtime draw on one limit, so a tensor too large is an allocation
// error (as cuMemAlloc's out-of-memory is), never a Go runtime panic or
// the kernel killing the process.
type memoryBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64
}

func (m *memoryBudget) take(n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n > m.limit-m.used {
		return fmt.Errorf("does not fit: the CPU runtime has %s free of its %s limit (sim.Options.MemoryLimit)",
			formatBytes(m.limit-m.used), formatBytes(m.limit))
	}
	m.used += n
	return nil
}

func (m *memoryBudget) give(n int64) {
	m.mu.Lock()
	m.used -= n
	m.mu.Unlock()
}

// DefaultMemoryLimit is three quarters of the machine's memory (from
// /proc/meminfo), or 8 GiB where that cannot be read.
func DefaultMemoryLimit() int64 {
	const fallback = 8 << 30
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return fallback
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kib, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kib <= 0 {
				return fallback
			}
			return kib * 1024 / 4 * 3
		}
	}
	return fallback
}

// formatBytes writes n in the largest binary unit that keeps it ≥ 1.
func formatBytes(n int64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.2f %s", v, units[u])
}
