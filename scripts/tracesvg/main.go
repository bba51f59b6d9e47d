// Command tracesvg draws a `hirrun run --trace` timeline as an SVG picture:
// a row per rank, a track per stream with the ops' slices, the async
// collectives and transfers from post to completion, and arrows linking a
// collective's slices across ranks, each op in a colour of its own whose
// hue says its kind (docs/TRACE.md).
//
//	go run ./scripts/tracesvg -title "async_wait.hir" trace.json > trace.svg
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/hirlab/hir/internal/timeline"
)

func main() {
	title := flag.String("title", "", "a title drawn above the timeline")
	width := flag.Int("width", 1100, "the picture's width in px")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: tracesvg [-title T] [-width PX] TRACE.json > TRACE.svg")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	in, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracesvg:", err)
		os.Exit(1)
	}
	defer in.Close()
	f, err := timeline.Read(in)
	if err == nil {
		err = timeline.SVG(os.Stdout, f, timeline.SVGOptions{Title: *title, Width: *width})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracesvg:", err)
		os.Exit(1)
	}
}
