package main

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
)

// inputBytes is the bytes of every input's logical tensor, as the host
// arrays made for them hold it, and a list naming each (for messages).
// A size past int64 is math.MaxInt64.
func inputBytes(prog *ir.Program) (int64, string) {
	var total int64
	var parts []string
	for _, in := range prog.Inputs {
		t := in.Tensor()
		if t == nil {
			continue
		}
		elems, ok := ir.ProductChecked(t.Shape())
		n, ok2 := ir.MulChecked(elems, int64(t.DType.Size()))
		if !ok || !ok2 {
			n = math.MaxInt64
		}
		if total > math.MaxInt64-n {
			total = math.MaxInt64
		} else {
			total += n
		}
		parts = append(parts, fmt.Sprintf("%s: %s", in, runtime.FormatBytes(n)))
	}
	return total, strings.Join(parts, ", ")
}

// checkInputMemory refuses, before any is made, inputs whose host arrays
// alone do not fit the memory limit (sim.DefaultMemoryLimit: the machine's,
// or HIR_SIM_MEMORY_LIMIT): making them would crash the process.
func checkInputMemory(prog *ir.Program) error {
	n, list := inputBytes(prog)
	limit := sim.DefaultMemoryLimit()
	if n <= limit {
		return nil
	}
	return &runtime.OutOfMemoryError{Where: "the host", What: "the inputs (" + list + ")",
		Asked: n, Free: -1, Limit: limit, Hint: "set " + sim.MemoryLimitEnv + " to change the limit"}
}

// reserveInputs takes the input arrays' bytes from rt's budget where rt
// shares the host's memory; release gives them back.
func reserveInputs(prog *ir.Program, rt runtime.Runtime) (release func(), err error) {
	r, ok := rt.(runtime.HostMemory)
	if !ok {
		return func() {}, nil
	}
	n, list := inputBytes(prog)
	return r.Reserve("the host copies of the inputs ("+list+")", n)
}

// inputStatus is the exit status for loadInputs's error: 1 for a resource
// error (the inputs' host arrays do not fit its memory: the
// *runtime.OutOfMemoryError that a device's or the CPU runtime's
// allocation gives too, whose status is 1, docs/RUNTIME.md), 2 for the
// rest (a missing or misnamed input, a file that does not fit its input:
// the command line is wrong).
func inputStatus(err error) int {
	var oom *runtime.OutOfMemoryError
	if errors.As(err, &oom) {
		return exitFail
	}
	return exitUsage
}
