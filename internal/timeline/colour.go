package timeline

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/hirlab/hir/ir"
)

// A slice's colour says what kind of op it is, by its hue family, and
// which op, by its shade: every op of one picture gets a colour of its
// own. The families are the op classes below; an op takes its class's
// next unused shade in order of first appearance on the timeline, and a
// class with more ops than shades goes on with colours made for the
// picture (distinct from every other colour in it).

// OpClass groups ops by what they do, for their colours.
type OpClass int

const (
	ClassCompute OpClass = iota // pointwise, reductions, matmul, fusions: blues and greens
	ClassComm                   // collectives, barrier, send/recv, one-sided transfers: oranges and reds
	ClassMemory                 // alloc, free, copy: purples
	ClassView                   // symmetric_contiguous_view, select, reshape: browns and yellows
	ClassSync                   // wait, streams and their ordering, loops: greys
	ClassOther                  // a name that is not an op of the IR: cyans and olives
	numClasses
)

// String is the class's name in a picture's key.
func (c OpClass) String() string {
	switch c {
	case ClassCompute:
		return "compute"
	case ClassComm:
		return "communication"
	case ClassMemory:
		return "memory"
	case ClassView:
		return "views"
	case ClassSync:
		return "streams and sync"
	}
	return "other"
}

// classShades are each class's colours, the most legible first. No colour
// is in two lists (TestShadesAreDistinct).
var classShades = [numClasses][]string{
	ClassCompute: {"#4e79a7", "#59a14f", "#76b7b2", "#a0cbe8", "#8cd17d", "#2b5c8a", "#3d7a36", "#499894"},
	ClassComm:    {"#f28e2b", "#e15759", "#ffbe7d", "#ff9d9a", "#b85a0d", "#a8323e", "#d37295", "#fabfd2"},
	ClassMemory:  {"#b07aa1", "#d4a6c8", "#7b4f8e", "#9467bd"},
	ClassView:    {"#9d7660", "#edc948", "#d7b5a6", "#b6992d"},
	ClassSync:    {"#79706e", "#bab0ac", "#555b61", "#9aa7b3", "#c7c7c7", "#6f7f73"},
	ClassOther:   {"#17becf", "#bcbd22", "#8c564b", "#e377c2"},
}

// opClasses is every opcode's spelling's class.
var opClasses = func() map[string]OpClass {
	m := map[string]OpClass{}
	for _, op := range ir.Opcodes() {
		c := ClassOther
		switch op.Class() {
		case ir.ClassPointwise, ir.ClassReduction, ir.ClassMatmul:
			c = ClassCompute
		case ir.ClassCollective, ir.ClassP2P, ir.ClassOneSided:
			c = ClassComm
		case ir.ClassMemory:
			c = ClassMemory
		case ir.ClassView:
			c = ClassView
		case ir.ClassSync, ir.ClassControl:
			c = ClassSync
		}
		switch {
		case op.Info().Meets:
			c = ClassComm // the ranks meet: traced and linked as a collective
		case op == ir.OpFusion:
			c = ClassCompute // a fused kernel
		}
		if _, seen := m[op.String()]; !seen { // max: pointwise first, then the reduction
			m[op.String()] = c
		}
	}
	return m
}()

// ClassOf is the class of the op a slice is named after; a name the IR
// does not spell is communication when its category is "collective", else
// other.
func ClassOf(name, cat string) OpClass {
	if c, ok := opClasses[name]; ok {
		return c
	}
	if cat == "collective" {
		return ClassComm
	}
	return ClassOther
}

// OpColour is one op's colour in a picture.
type OpColour struct {
	Name   string
	Class  OpClass
	Colour string // "#rrggbb"
}

// Colours gives each op that names an X slice of f a colour of its own:
// its class's shades in order of first appearance (by start, then rank,
// then track), then colours made apart from all others. The list is in
// that order.
func Colours(f *File) []OpColour {
	var all []Event
	for _, e := range f.TraceEvents {
		if e.Ph == "X" {
			all = append(all, e)
		}
	}
	return colours(all)
}

// colours is Colours of the X slices in all.
func colours(all []Event) []OpColour {
	all = slices.Clone(all)
	slices.SortStableFunc(all, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.Ts, b.Ts), cmp.Compare(a.Pid, b.Pid), cmp.Compare(a.Tid, b.Tid))
	})
	var out []OpColour
	used := map[string]bool{}
	var taken [numClasses]int // shades given out, by class
	extra := 0                // colours made so far
	for _, e := range all {
		if slices.ContainsFunc(out, func(c OpColour) bool { return c.Name == e.Name }) {
			continue
		}
		c := OpColour{Name: e.Name, Class: ClassOf(e.Name, e.Cat)}
		shades := classShades[c.Class]
		if taken[c.Class] < len(shades) {
			c.Colour = shades[taken[c.Class]]
			taken[c.Class]++
		} else {
			for c.Colour == "" || used[c.Colour] || isShade(c.Colour) {
				c.Colour = madeColour(extra)
				extra++
			}
		}
		used[c.Colour] = true
		out = append(out, c)
	}
	return out
}

// isShade reports whether colour is one of the classes' shades.
func isShade(colour string) bool {
	for _, shades := range classShades {
		if slices.Contains(shades, colour) {
			return true
		}
	}
	return false
}

// madeColour is the k-th colour made for a class out of shades: hues a
// golden angle apart, in three lightnesses.
func madeColour(k int) string {
	h := math.Mod(float64(k)*137.508, 360)
	l := []float64{0.45, 0.62, 0.32}[k%3]
	return hsl(h, 0.55, l)
}

// hsl writes a colour given by hue (degrees), saturation and lightness as
// "#rrggbb".
func hsl(h, s, l float64) string {
	c := (1 - math.Abs(2*l-1)) * s
	x := c * (1 - math.Abs(math.Mod(h/60, 2)-1))
	m := l - c/2
	var r, g, b float64
	switch {
	case h < 60:
		r, g = c, x
	case h < 120:
		r, g = x, c
	case h < 180:
		g, b = c, x
	case h < 240:
		g, b = x, c
	case h < 300:
		r, b = x, c
	default:
		r, b = c, x
	}
	to := func(v float64) int { return int(math.Round((v + m) * 255)) }
	return fmt.Sprintf("#%02x%02x%02x", to(r), to(g), to(b))
}

// light reports whether text on colour ("#rrggbb") reads better dark than
// white: its relative luminance is over 0.3.
func light(colour string) bool {
	var r, g, b int
	if _, err := fmt.Sscanf(colour, "#%02x%02x%02x", &r, &g, &b); err != nil {
		return false
	}
	lin := func(v int) float64 {
		c := float64(v) / 255
		if c <= 0.04045 {
			return c / 12.92
		}
		return math.Pow((c+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(r)+0.7152*lin(g)+0.0722*lin(b) > 0.3
}
