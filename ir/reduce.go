package ir

import "fmt"

// The reduction-axes rule, one function every consumer calls (the checker,
// codegen, the CPU runtime): axes count from 0 up to the rank, none
// twice; a negative axis is out of range (the text format has no
// from-the-end axes).

// AxisError is one problem with a reduction's axes list.
type AxisError struct {
	Axis  int64
	Rank  int
	Twice bool // listed twice (else out of range)
}

func (e *AxisError) Error() string {
	if e.Twice {
		return fmt.Sprintf("axis %d is listed twice", e.Axis)
	}
	return fmt.Sprintf("axis %d is out of range for a rank-%d input", e.Axis, e.Rank)
}

// ReducedAxes marks which of rank axes the list axes reduces, and lists
// every problem with it, in order.
func ReducedAxes(axes []int64, rank int) (reduced []bool, errs []*AxisError) {
	reduced = make([]bool, rank)
	for _, a := range axes {
		switch {
		case a < 0 || a >= int64(rank):
			errs = append(errs, &AxisError{Axis: a, Rank: rank})
		case reduced[a]:
			errs = append(errs, &AxisError{Axis: a, Rank: rank, Twice: true})
		default:
			reduced[a] = true
		}
	}
	return reduced, errs
}

// ReducedShape is the shape a reduction of the reduced axes of in leaves:
// those axes dropped, or kept with extent 1 (keepdim).
func ReducedShape(in []int64, reduced []bool, keepdim bool) []int64 {
	out := make([]int64, 0, len(in))
	for i, e := range in {
		switch {
		case !reduced[i]:
			out = append(out, e)
		case keepdim:
			out = append(out, 1)
		}
	}
	return out
}
