package parser

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hirlab/hir/passes"
)

// BenchmarkParseAndCheck is what `hirrun check` does to a program of
// 100,000 ops: parse, verify, then the passes that can reject it (type and
// shape inference, memory and sharding validation, the symmetric-heap
// rules). MB/s is of source text.
func BenchmarkParseAndCheck(b *testing.B) {
	benchParseAndCheck(b, 100_000)
}

// benchParseAndCheck times what `hirrun check` does to a generated program
// of n ops; MB/s is of source text.
func benchParseAndCheck(b *testing.B, n int) {
	src := generateProgram(n)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		prog, err := Parse("bench.hir", src)
		if err != nil {
			b.Fatal(err)
		}
		if err := passes.Check(prog, &passes.Context{Verified: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGoParser is the peer figure for BenchmarkParse: Go's own
// go/parser on Go source of about the same size (the standard library's
// go/, net/http and runtime packages, whole files that parse, one by one), in MB/s of
// source, measured in the same run.
func BenchmarkGoParser(b *testing.B) {
	want := len(generateProgram(100_000))
	var files [][]byte
	total := 0
	for _, dir := range []string{"go", "net/http", "runtime", "cmd/compile/internal"} {
		filepath.WalkDir(filepath.Join(runtime.GOROOT(), "src", dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || total >= want {
				return nil
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || filepath.Ext(path) != ".go" {
				return nil
			}
			src, err := os.ReadFile(path)
			if _, perr := parser.ParseFile(token.NewFileSet(), path, src, parser.ParseComments); err == nil && perr == nil {
				files = append(files, src)
				total += len(src)
			}
			return nil
		})
	}
	if total < want/2 {
		b.Skipf("found only %d bytes of Go source under GOROOT", total)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		fset := token.NewFileSet()
		for i, src := range files {
			if _, err := parser.ParseFile(fset, itoa(i)+".go", src, parser.ParseComments); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkMillionOpCheck is BenchmarkParseAndCheck on a program of
// 1,000,000 ops (about 45 MB of text): `hirrun check` on it should take
// under 2 s (issue 11). Skipped with -short.
func BenchmarkMillionOpCheck(b *testing.B) {
	if testing.Short() {
		b.Skip("a program of a million ops")
	}
	benchParseAndCheck(b, 1_000_000)
}
