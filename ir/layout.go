package ir

import (
	"fmt"
	"slices"
)

// A collective's layout facts: which axes a call names, and how its local
// input and output shapes must relate. The evaluator, both runtimes and
// their shared contract (runtime.CollectiveCall.Resolve) ask these methods
// instead of switching on the layout themselves.

// CallAxes is the axis (the one split or gathered) and concat axis (the one
// concatenated, all_to_all only) of a call whose operand has type in and
// whose result has type out, read off their sharding; 0 where the layout
// names none.
func (l Layout) CallAxes(in, out *TensorType) (axis, concat int) {
	switch l {
	case LayoutGather:
		return in.ShardAxis(), 0
	case LayoutScatter:
		return out.ShardAxis(), 0
	case LayoutAllToAll:
		return out.ShardAxis(), in.ShardAxis()
	}
	return 0, 0
}

// NormaliseAxes keeps the axes the layout uses and zeroes the others, so
// that calls that mean the same compare equal.
func (l Layout) NormaliseAxes(axis, concat int) (int, int) {
	switch l {
	case LayoutGather, LayoutScatter:
		return axis, 0
	case LayoutAllToAll:
		return axis, concat
	}
	return 0, 0
}

// CheckShapes checks that local shapes in and out fit the layout on world
// ranks, with axis and concat as the call names them.
func (l Layout) CheckShapes(in, out []int64, axis, concat, world int) error {
	axisIn := func(a int, shape []int64, which string) error {
		if a < 0 || a >= len(shape) {
			return fmt.Errorf("%s axis %d out of range for a shape of rank %d (%v)", which, a, len(shape), shape)
		}
		return nil
	}
	switch l {
	case LayoutGather:
		if err := axisIn(axis, in, "input"); err != nil {
			return err
		}
		if !scaledBy(out, in, axis, world) {
			return fmt.Errorf("output shape %v is not the input's %v with axis %d times %d", out, in, axis, world)
		}
	case LayoutScatter:
		if err := axisIn(axis, out, "output"); err != nil {
			return err
		}
		if !scaledBy(in, out, axis, world) {
			return fmt.Errorf("input shape %v is not the output's %v with axis %d times %d", in, out, axis, world)
		}
	case LayoutAllToAll:
		split := axis
		if err := axisIn(concat, in, "concat"); err != nil {
			return err
		}
		if err := axisIn(split, in, "split"); err != nil {
			return err
		}
		if concat == split {
			return fmt.Errorf("the split axis and the concat axis are both %d", split)
		}
		ok := len(out) == len(in)
		for i := 0; ok && i < len(in); i++ {
			switch i {
			case concat:
				ok = out[i] == in[i]*int64(world)
			case split:
				ok = out[i]*int64(world) == in[i]
			default:
				ok = out[i] == in[i]
			}
		}
		if !ok {
			return fmt.Errorf("input %v and output %v do not fit a split of axis %d and a concat on axis %d over %d ranks", in, out, split, concat, world)
		}
	default:
		if !slices.Equal(in, out) {
			return fmt.Errorf("input shape %v and output shape %v differ", in, out)
		}
	}
	return nil
}

// scaledBy reports whether big is small with axis a's extent times d.
func scaledBy(big, small []int64, a, d int) bool {
	if len(big) != len(small) {
		return false
	}
	for i := range big {
		want := small[i]
		if i == a {
			want *= int64(d)
		}
		if big[i] != want {
			return false
		}
	}
	return true
}
