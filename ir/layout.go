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

// ResultType is the type a collective of layout l gives for an operand of
// type t (SEMANTICS.md's table): gather needs t sharded and unshards it;
// scatter needs t unsharded and shards it on axis (its axis= attribute);
// all_to_all needs t sharded and moves the sharding to axis, which must
// be another axis; the other layouts keep t's type. The result is a copy
// of t made by clone (nil: (*TensorType).Clone), so that a caller may give
// one from its own store. The errors name the collective op and the
// operand x, as the checker prints them after "op: ".
func (l Layout) ResultType(op string, x fmt.Stringer, t *TensorType, axis int64, clone func(*TensorType) *TensorType) (*TensorType, error) {
	shard := -1 // the result's sharded axis, where l moves the sharding
	switch l {
	case LayoutGather:
		if !t.IsSharded() {
			return nil, fmt.Errorf("%s is not sharded (%s); there is nothing to gather", x, t)
		}
	case LayoutScatter:
		if t.IsSharded() {
			return nil, fmt.Errorf("%s is already sharded on axis %d; %s needs an unsharded tensor", x, t.ShardAxis(), op)
		}
		if err := axisOf(x, t, axis); err != nil {
			return nil, err
		}
		shard = int(axis)
	case LayoutAllToAll:
		if !t.IsSharded() {
			return nil, fmt.Errorf("%s is not sharded (%s); all_to_all moves the sharding from one axis to another", x, t)
		}
		if err := axisOf(x, t, axis); err != nil {
			return nil, err
		}
		if int(axis) == t.ShardAxis() {
			return nil, fmt.Errorf("%s is already sharded on axis %d; axis= must name another axis", x, axis)
		}
		shard = int(axis)
	}
	if clone == nil {
		clone = (*TensorType).Clone
	}
	res := clone(t)
	if l == LayoutGather || shard >= 0 {
		for i := range res.Dims {
			res.Dims[i].Parallel = Serial
		}
	}
	if shard >= 0 {
		res.Dims[shard].Parallel = DIDx
	}
	return res, nil
}

// axisOf checks a collective's axis= attribute against its operand x of
// type t.
func axisOf(x fmt.Stringer, t *TensorType, axis int64) error {
	if axis < 0 || axis >= int64(t.Rank()) {
		return fmt.Errorf("axis=%d is out of range for %s of type %s (rank %d)", axis, x, t, t.Rank())
	}
	return nil
}

// BenchShapes are the local shapes of the call that benchmarks a
// collective of layout l over n elements on world ranks, n counted as
// nccl-tests counts a call's size (SizedByOutput): [n] to [n] for the same
// layout, [n/world] to [n] for gather, [n] to [n/world] for scatter, and
// for all_to_all [1, n] split on axis 1 and concatenated on axis 0, giving
// [world, n/world]. Where l splits or joins, n is rounded down to a
// multiple of world; false where n is smaller than world (for every
// layout, as hirrun bench skips such sizes) or l is no collective's.
func (l Layout) BenchShapes(n int64, world int) (in, out []int64, axis, concat int, ok bool) {
	d := int64(world)
	if d <= 0 || n/d == 0 {
		return nil, nil, 0, 0, false
	}
	blk := n / d
	switch l {
	case LayoutSame:
		return []int64{n}, []int64{n}, 0, 0, true
	case LayoutGather:
		return []int64{blk}, []int64{blk * d}, 0, 0, true
	case LayoutScatter:
		return []int64{blk * d}, []int64{blk}, 0, 0, true
	case LayoutAllToAll:
		return []int64{1, blk * d}, []int64{d, blk}, 1, 0, true
	}
	return nil, nil, 0, 0, false
}

// SizedByOutput reports whether a call of layout l is counted by the size
// of its output rather than its input, as nccl-tests counts it (and hirrun
// bench and auto's table file it): gather's output, the others' input.
func (l Layout) SizedByOutput() bool { return l == LayoutGather }
