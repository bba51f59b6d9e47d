package sim

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/hirlab/hir/runtime"
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

// Reserve takes bytes the caller holds outside the runtime but in the same
// memory (the host arrays of a program's inputs) from the budget, so the
// limit covers them too; release gives them back. It fails with a
// *runtime.OutOfMemoryError.
func (rt *Runtime) Reserve(what string, bytes int64) (release func(), err error) {
	if err := rt.mem.take(bytes, what); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { rt.mem.give(bytes) }) }, nil
}

// take reserves n bytes for what (an allocation's description, for the
// error) or returns a *runtime.OutOfMemoryError naming the sizes.
func (m *memoryBudget) take(n int64, what string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n < 0 || n > m.limit-m.used {
		return m.errLocked(n, what)
	}
	m.used += n
	return nil
}

// check says whether n bytes would fit now, without taking them: for
// memory the runtime holds outside any buffer (a compiled kernel's
// broadcast maps) before it is made.
func (m *memoryBudget) check(n int64, what string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n < 0 || n > m.limit-m.used {
		return m.errLocked(n, what)
	}
	return nil
}

func (m *memoryBudget) errLocked(n int64, what string) error {
	return &runtime.OutOfMemoryError{Where: "the CPU runtime", What: what, Asked: n,
		Free: m.limit - m.used, Limit: m.limit, Hint: limitHint}
}

// limitHint says how to change the limit; it ends every out-of-memory error.
const limitHint = "set " + MemoryLimitEnv + " or sim.Options.MemoryLimit to change the limit"

// MemoryLimitEnv names the environment variable that sets
// DefaultMemoryLimit: bytes, or a number with a unit (KiB, MiB, GiB, TiB;
// KB, MB, GB, TB are read as the binary units too), e.g. "6GiB".
const MemoryLimitEnv = "HIR_SIM_MEMORY_LIMIT"

// ParseBytes reads a size as MemoryLimitEnv takes it.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	upper := strings.ToUpper(t)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
		{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(upper, u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 || v*float64(mult) >= 1<<62 {
		return 0, fmt.Errorf("%q is not a positive size in bytes (e.g. 6GiB, 512MiB, 1048576)", s)
	}
	return int64(v * float64(mult)), nil
}

func (m *memoryBudget) give(n int64) {
	m.mu.Lock()
	m.used -= n
	m.mu.Unlock()
}

// DefaultMemoryLimit is what MemoryLimitEnv says, or else three quarters
// of the machine's memory (from /proc/meminfo), or 8 GiB where that cannot
// be read. A value of MemoryLimitEnv that cannot be read is ignored (New
// reports it: see memoryLimitFromEnv).
func DefaultMemoryLimit() int64 {
	if v, err := memoryLimitFromEnv(); err == nil && v > 0 {
		return v
	}
	return machineMemoryLimit()
}

// memoryLimitFromEnv is MemoryLimitEnv's value, 0 when it is not set.
func memoryLimitFromEnv() (int64, error) {
	s := os.Getenv(MemoryLimitEnv)
	if s == "" {
		return 0, nil
	}
	v, err := ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", MemoryLimitEnv, err)
	}
	return v, nil
}

func machineMemoryLimit() int64 {
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
func formatBytes(n int64) string { return runtime.FormatBytes(n) }
