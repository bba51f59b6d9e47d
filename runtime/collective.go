package runtime

import (
	"fmt"
	"slices"

	"github.com/hirlab/hir/ir"
)

// CheckShapes checks that c's local input and output shapes fit its op on
// a world of d ranks: the contract every backend's collectives share
// (docs/SEMANTICS.md gives the ops' meaning).
func (c *CollectiveCall) CheckShapes(d int) error {
	in, out := c.In.Shape, c.Out.Shape
	axisIn := func(a int, shape []int64, which string) error {
		if a < 0 || a >= len(shape) {
			return fmt.Errorf("%s axis %d out of range for a shape of rank %d (%v)", which, a, len(shape), shape)
		}
		return nil
	}
	switch c.Op.Info().Layout {
	case ir.LayoutGather:
		if err := axisIn(c.Axis, in, "input"); err != nil {
			return err
		}
		if !scaledBy(out, in, c.Axis, d) {
			return fmt.Errorf("output shape %v is not the input's %v with axis %d times %d", out, in, c.Axis, d)
		}
	case ir.LayoutScatter:
		if err := axisIn(c.Axis, out, "output"); err != nil {
			return err
		}
		if !scaledBy(in, out, c.Axis, d) {
			return fmt.Errorf("input shape %v is not the output's %v with axis %d times %d", in, out, c.Axis, d)
		}
	case ir.LayoutAllToAll:
		concat, split := c.ConcatAxis, c.Axis
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
				ok = out[i] == in[i]*int64(d)
			case split:
				ok = out[i]*int64(d) == in[i]
			default:
				ok = out[i] == in[i]
			}
		}
		if !ok {
			return fmt.Errorf("input %v and output %v do not fit a split of axis %d and a concat on axis %d over %d ranks", in, out, split, concat, d)
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
