package runtime

import (
	"fmt"
	"strings"
)

// OutOfMemoryError is an allocation that does not fit: a runtime's memory
// budget (the CPU runtime's limit, a GPU's memory) has fewer bytes free than
// were asked for. Every runtime returns it (wrapped with the rank and the
// op) for memory it cannot give, so callers tell a program too large for
// the machine from a bug with errors.As:
//
//	var oom *runtime.OutOfMemoryError
//	if errors.As(err, &oom) { ... oom.Asked, oom.Free, oom.Limit ... }
type OutOfMemoryError struct {
	// Where names the memory: "the CPU runtime", "device 0 (NVIDIA H100)",
	// "the host".
	Where string
	// What names the allocation: "alloc in global memory", "input %x",
	// "collective staging"; may be empty.
	What string
	// Asked is the bytes asked for; Free the bytes free when it was asked
	// and Limit the whole budget (or the device's memory). Free and Limit
	// are -1 where they are not known.
	Asked, Free, Limit int64
	// Hint says how to raise the limit, where it can be raised.
	Hint string
	// Err is the underlying failure (a CUDA driver error), or nil.
	Err error
}

func (e *OutOfMemoryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "out of memory: %s", FormatBytes(e.Asked))
	if e.What != "" {
		b.WriteString(" for " + e.What)
	}
	b.WriteString(" does not fit")
	where := e.Where
	if where == "" {
		where = "the runtime"
	}
	switch {
	case e.Free >= 0 && e.Limit >= 0:
		fmt.Fprintf(&b, ": %s has %s free of its %s limit", where, FormatBytes(e.Free), FormatBytes(e.Limit))
	case e.Limit >= 0:
		fmt.Fprintf(&b, ": %s has a %s limit", where, FormatBytes(e.Limit))
	default:
		fmt.Fprintf(&b, " in %s", where)
	}
	if e.Hint != "" {
		b.WriteString(" (" + e.Hint + ")")
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *OutOfMemoryError) Unwrap() error { return e.Err }

// FormatBytes writes n in the largest binary unit that keeps it ≥ 1:
// "512 bytes", "1.50 KiB", "14.55 TiB".
func FormatBytes(n int64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, u := float64(n), 0
	for (v >= 1024 || v <= -1024) && u < len(units)-1 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.2f %s", v, units[u])
}

// HostMemory is implemented by a runtime whose device memory is the host's
// (the CPU runtime). Host copies made beside its buffers — the input
// arrays, their per-rank shards, the outputs read back — take from the same
// budget, so a program too large for the machine stops with an
// *OutOfMemoryError instead of crashing the process.
type HostMemory interface {
	// Reserve takes bytes from the budget for what (named in the error);
	// release gives them back (calling it again does nothing).
	Reserve(what string, bytes int64) (release func(), err error)
}

// Labeler is implemented by streams that can name the part of the host
// program whose enqueued work failed. Work enqueued after Label(l) carries
// l; when it fails, the error that Synchronize (or a later call) reports is
// a *WorkError with that label. The evaluator labels work with the op that
// enqueued it, so an asynchronous failure still names its source position.
type Labeler interface {
	Label(label any)
}

// WorkError is the failure of enqueued work labelled by Labeler.Label.
type WorkError struct {
	Label any
	Err   error
}

func (e *WorkError) Error() string { return e.Err.Error() }
func (e *WorkError) Unwrap() error { return e.Err }
