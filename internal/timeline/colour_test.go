package timeline

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

// The ops of each checked-in picture's trace get pairwise distinct
// colours (before, all_gather and copy shared one, as did matmul and
// symmetric_contiguous_view), each a shade of its class's family, and the
// picture's key shows every op in its colour.
func TestDocsPicturesColoursAreDistinct(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "docs", "images", "trace-*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, paths, "no docs/images/trace-*.json")
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			f, err := Read(bytes.NewReader(raw))
			require.NoError(t, err)
			var names []string
			for _, e := range f.TraceEvents {
				if e.Ph == "X" && !slices.Contains(names, e.Name) {
					names = append(names, e.Name)
				}
			}
			require.GreaterOrEqual(t, len(names), 5, "ops in the trace")
			cs := Colours(f)
			got := map[string]OpColour{}
			for _, c := range cs {
				got[c.Name] = c
			}
			require.Len(t, got, len(names), "one colour per op: %v", cs)
			for i, a := range names {
				for _, b := range names[i+1:] {
					assert.NotEqual(t, got[a].Colour, got[b].Colour, "%s and %s share a colour", a, b)
				}
				assert.Contains(t, classShades[got[a].Class], got[a].Colour, "%s (%s) is not one of its class's shades", a, got[a].Class)
			}
			var svg bytes.Buffer
			require.NoError(t, SVG(&svg, f, SVGOptions{}))
			for _, c := range cs {
				key := regexp.MustCompile(`fill="` + c.Colour + `"/>\s*<text[^>]*>` + regexp.QuoteMeta(c.Name) + `</text>`)
				assert.Regexp(t, key, svg.String(), "the key shows %s in %s", c.Name, c.Colour)
			}
		})
	}
}

// The ops the issue found sharing colours, in the classes that say what
// they are.
func TestOpClasses(t *testing.T) {
	for name, want := range map[string]OpClass{
		"all_gather": ClassComm, "all_reduce": ClassComm, "barrier": ClassComm, "send": ClassComm, "transfer": ClassComm,
		"matmul": ClassCompute, "exp": ClassCompute, "max": ClassCompute, "sum": ClassCompute, "fusion": ClassCompute,
		"copy": ClassMemory, "alloc": ClassMemory, "free": ClassMemory,
		"symmetric_contiguous_view": ClassView, "select": ClassView, "reshape": ClassView,
		"wait": ClassSync, "stream": ClassSync, "set_stream": ClassSync, "pick_stream": ClassSync, "wait_stream": ClassSync,
	} {
		assert.Equal(t, want, ClassOf(name, "op"), "%s's class", name)
	}
	assert.Equal(t, ClassComm, ClassOf("my_collective", "collective"), "a collective the IR does not spell")
	assert.Equal(t, ClassOther, ClassOf("my_op", "op"), "an op the IR does not spell")
	for _, op := range ir.Opcodes() {
		assert.NotEqual(t, ClassOther, ClassOf(op.String(), "op"), "%s has no class", op)
	}
}

// No shade is in two classes' families, and every shade is a colour.
func TestShadesAreDistinct(t *testing.T) {
	seen := map[string]OpClass{}
	for class, shades := range classShades {
		require.NotEmpty(t, shades, "%s has no shades", OpClass(class))
		for _, c := range shades {
			assert.Regexp(t, `^#[0-9a-f]{6}$`, c)
			if prev, dup := seen[c]; dup {
				assert.Fail(t, "shared shade", "%s is a shade of %s and of %s", c, prev, OpClass(class))
			}
			seen[c] = OpClass(class)
		}
	}
}

// Every opcode in one trace, more ops of a class than it has shades: still
// a colour each, the class's shades first in order of appearance.
func TestColoursOfEveryOp(t *testing.T) {
	var f File
	for i, op := range ir.Opcodes() {
		f.TraceEvents = append(f.TraceEvents,
			Event{Name: op.String(), Ph: "X", Ts: Micros(1000 * i), Dur: 500, Pid: i % 2, Tid: 1},
			Event{Name: op.String(), Ph: "X", Ts: Micros(1000*i + 500), Dur: 100, Pid: 1 - i%2, Tid: 1}) // seen twice: one colour
	}
	f.TraceEvents = append(f.TraceEvents, Event{Name: "not_an_op", Ph: "X", Ts: 1_000_000, Dur: 1, Pid: 0, Tid: 1},
		Event{Name: "process_name", Ph: "M", Args: map[string]any{"name": "rank 0"}})
	cs := Colours(&f)
	byColour := map[string]string{}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
		if prev, dup := byColour[c.Colour]; dup {
			assert.Fail(t, "shared colour", "%s and %s are both %s", prev, c.Name, c.Colour)
		}
		byColour[c.Colour] = c.Name
		assert.Regexp(t, `^#[0-9a-f]{6}$`, c.Colour, c.Name)
	}
	want := []string{}
	for _, op := range ir.Opcodes() {
		if !slices.Contains(want, op.String()) {
			want = append(want, op.String())
		}
	}
	assert.Equal(t, append(want, "not_an_op"), names, "ops in order of first appearance, once each")
	var compute []string
	for _, c := range cs {
		if c.Class == ClassCompute {
			compute = append(compute, c.Colour)
		}
	}
	require.Greater(t, len(compute), len(classShades[ClassCompute]), "more compute ops than shades")
	assert.Equal(t, classShades[ClassCompute], compute[:len(classShades[ClassCompute])], "compute's shades first, in order")
}

func TestLight(t *testing.T) {
	assert.True(t, light("#ffffff"))
	assert.True(t, light("#edc948"), "yellow takes dark letters")
	assert.False(t, light("#000000"))
	assert.False(t, light("#4e79a7"), "blue takes white letters")
	assert.False(t, light("nonsense"))
	assert.Equal(t, "#ff0000", hsl(0, 1, 0.5))
	assert.Equal(t, "#00ff00", hsl(120, 1, 0.5))
	assert.Equal(t, "#0000ff", hsl(240, 1, 0.5))
}
