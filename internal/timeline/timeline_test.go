package timeline

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pictures in docs/TRACE.md are their traces drawn by SVG, with the
// titles scripts/trace-pictures.sh gives them.
func TestDocsPicturesAreCurrent(t *testing.T) {
	for name, title := range map[string]string{
		"trace-async_wait":           "testdata/async_wait.hir: hirrun run --repeat 3 --trace (sim backend, the last run)",
		"trace-streams_join":         "testdata/streams_join.hir: hirrun run --repeat 3 --trace (sim backend, the last run)",
		"trace-tp_all_gather_matmul": "testdata/tp_all_gather_matmul.hir: hirrun run --repeat 3 --trace (sim backend, the last run)",
		"trace-gpu-overlap":          "docs/images/trace-gpu-overlap.hir: hirrun run --backend cuda --nproc 2 --repeat 3 --trace --trace-overlap (2 x H100, the last run)",
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "docs", "images")
			raw, err := os.ReadFile(filepath.Join(dir, name+".json"))
			require.NoError(t, err)
			f, err := Read(bytes.NewReader(raw))
			require.NoError(t, err)
			var got bytes.Buffer
			require.NoError(t, SVG(&got, f, SVGOptions{Title: title}))
			want, err := os.ReadFile(filepath.Join(dir, name+".svg"))
			require.NoError(t, err)
			assert.Equal(t, string(want), got.String(), "docs/images/%s.svg is not its JSON drawn: run scripts/trace-pictures.sh's tracesvg commands", name)
		})
	}
}

// A small trace drawn: well-formed XML, every slice with its tooltip and
// label where it fits, the flow an arrow, the async slice, the names.
func TestSVG(t *testing.T) {
	doc := `{"traceEvents":[
{"name":"process_name","ph":"M","ts":0,"pid":0,"tid":0,"args":{"name":"rank 0"}},
{"name":"process_name","ph":"M","ts":0,"pid":1,"tid":0,"args":{"name":"rank 1"}},
{"name":"thread_name","ph":"M","ts":0,"pid":0,"tid":1,"args":{"name":"default stream"}},
{"name":"thread_name","ph":"M","ts":0,"pid":1,"tid":1,"args":{"name":"default stream"}},
{"name":"all_reduce_with_a_long_name","ph":"X","ts":0.000,"dur":50.000,"pid":0,"tid":1,"args":{"pos":"p.hir:3:6"}},
{"name":"exp","ph":"X","ts":10.000,"dur":1.000,"pid":0,"tid":1},
{"name":"all_reduce_with_a_long_name","ph":"X","ts":20.000,"dur":40.000,"pid":1,"tid":1},
{"name":"x & y","ph":"X","ts":60.000,"dur":0.001,"pid":1,"tid":1},
{"name":"all_reduce_with_a_long_name","ph":"b","ts":0.000,"pid":0,"tid":1,"id":"a"},
{"name":"all_reduce_with_a_long_name","ph":"e","ts":70.000,"pid":0,"tid":1,"id":"a"},
{"name":"all_reduce_with_a_long_name","ph":"s","ts":25.000,"pid":0,"tid":1,"id":"f1","bp":"e"},
{"name":"all_reduce_with_a_long_name","ph":"f","ts":40.000,"pid":1,"tid":1,"id":"f1","bp":"e"}
]}`
	f, err := Read(strings.NewReader(doc))
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, SVG(&out, f, SVGOptions{Title: "a <test>", Width: 800}))
	svg := out.String()
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the SVG is not well-formed XML")
	}
	assert.Equal(t, 4, strings.Count(svg, `class="slice"`), "X slices drawn")
	assert.Equal(t, 2, strings.Count(svg, `class="async"/>`), "the async slice and the legend's")
	assert.Equal(t, 2, strings.Count(svg, `class="flow"`), "the flow and the legend's arrow")
	for _, s := range []string{">rank 0<", ">rank 1<", ">default stream<", "a &lt;test&gt;", "x &amp; y", "p.hir:3:6", ">all_reduce_with_a_long_name<", ">exp<"} {
		assert.Contains(t, svg, s)
	}
	// exp is 1 µs of 70: too narrow for its name inside the slice.
	assert.NotRegexp(t, regexp.MustCompile(`class="slabel">exp<`), svg)
}

func TestMicrosRoundTrip(t *testing.T) {
	for _, ns := range []Micros{0, 1, 999, 1000, 1001, 1_767_225_600_123_456_789, -1} {
		raw, err := json.Marshal(ns)
		require.NoError(t, err)
		var back Micros
		require.NoError(t, json.Unmarshal(raw, &back))
		assert.Equal(t, ns, back, "%s", raw)
	}
	var m Micros
	assert.Error(t, json.Unmarshal([]byte(`"1"`), &m), "a string is not a time")
}

// A trace recorded with --trace-overlap says so (otherData), keeps saying
// so through Write and Read, and its picture's legend says what a host
// slice then is.
func TestOverlapTraceSaysSo(t *testing.T) {
	f := &File{DisplayTimeUnit: "ns", OtherData: &OtherData{TraceOverlap: true}, TraceEvents: []Event{
		{Name: "thread_name", Ph: "M", Pid: 0, Tid: 1, Args: map[string]any{"name": "default stream"}},
		{Name: "matmul", Ph: "X", Ts: 0, Dur: 5, Pid: 0, Tid: 1},
	}}
	var b bytes.Buffer
	require.NoError(t, Write(&b, f))
	require.Contains(t, b.String(), `"otherData":{"trace_overlap":true}`)
	back, err := Read(&b)
	require.NoError(t, err)
	require.Equal(t, f.OtherData, back.OtherData)
	var svg bytes.Buffer
	require.NoError(t, SVG(&svg, back, SVGOptions{}))
	assert.Contains(t, svg.String(), "the time to enqueue it")
	back.OtherData = nil
	svg.Reset()
	require.NoError(t, SVG(&svg, back, SVGOptions{}))
	assert.Contains(t, svg.String(), "its stream synchronised")
}
