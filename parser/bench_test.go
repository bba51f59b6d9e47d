package parser

import (
	"testing"

	"github.com/hirlab/hir/passes"
)

// BenchmarkParseAndCheck is what `hirrun check` does to a program of
// 100,000 ops: parse, verify, then the passes that can reject it (type and
// shape inference, memory and sharding validation, the symmetric-heap
// rules). MB/s is of source text.
func BenchmarkParseAndCheck(b *testing.B) {
	src := generateProgram(100_000)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		prog, err := Parse("bench.hir", src)
		if err != nil {
			b.Fatal(err)
		}
		if err := passes.Check(prog, &passes.Context{}); err != nil {
			b.Fatal(err)
		}
	}
}
