package main

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files from the current output")

// result is what one hirrun invocation did.
type result struct {
	code           int
	stdout, stderr string
}

func hirrun(args ...string) result {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// argsLine reads the hirrun flags a testdata program asks for on its first
// line: `// args: --input x=random:seed=1`.
func argsLine(src []byte) []string {
	first, _, _ := bytes.Cut(src, []byte("\n"))
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(first), []byte("// args:"))
	if !ok {
		return nil
	}
	return strings.Fields(string(rest))
}

// TestGolden runs every testdata/*.hir with `hirrun run ARGS FILE` and
// compares the exit code, stdout and stderr with testdata/*.golden.
// Run `go test ./cmd/hirrun -run Golden -update` to rewrite the goldens.
func TestGolden(t *testing.T) {
	t.Chdir("../..") // so messages name testdata/x.hir, as a user at the root sees them
	files, err := filepath.Glob("testdata/*.hir")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no testdata/*.hir")
	// testdata/contract: programs that keep the checker's promise
	// (docs/SEMANTICS.md, "The contract"), run like the others
	contract, err := filepath.Glob("testdata/contract/*.hir")
	require.NoError(t, err)
	files = append(files, contract...)
	for _, file := range files {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(file, "testdata/"), ".hir"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			require.NoError(t, err)
			args := append(append([]string{"run"}, argsLine(src)...), file)
			r := hirrun(args...)
			got := fmt.Sprintf("$ hirrun %s\nexit %d\n-- stdout --\n%s-- stderr --\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			golden := strings.TrimSuffix(file, ".hir") + ".golden"
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run `go test ./cmd/hirrun -run Golden -update` to create it")
			if !sameOutput(string(want), got) {
				assert.Empty(t, cmp.Diff(string(want), got), "output differs from %s (run with -update to accept it) (-want +got)", golden)
			}
		})
	}
}

// sameOutput compares a golden with a run's output: byte for byte on amd64,
// where the goldens are made. On other CPUs Go's math library may round
// the last bit of a float64 exp, log, tanh or erf otherwise (arm64 fuses
// multiply-adds), so there a number may differ in its last printed digits:
// the text around the numbers must be the same, and each number within
// a hundred units of its printed last digit (relative: a float64 printed
// to 17 digits within 1e-14, enough for an error of a few ulps carried
// through a log).
func sameOutput(want, got string) bool {
	if want == got {
		return true
	}
	if goruntime.GOARCH == "amd64" {
		return false
	}
	return sameUpToLastDigits(want, got)
}

var decimalRE = regexp.MustCompile(`-?[0-9]+\.[0-9]+(e[-+][0-9]+)?`)

func sameUpToLastDigits(want, got string) bool {
	if !slices.Equal(decimalRE.Split(want, -1), decimalRE.Split(got, -1)) {
		return false
	}
	ws, gs := decimalRE.FindAllString(want, -1), decimalRE.FindAllString(got, -1)
	for i := range ws {
		w, err1 := strconv.ParseFloat(ws[i], 64)
		g, err2 := strconv.ParseFloat(gs[i], 64)
		if err1 != nil || err2 != nil {
			return false
		}
		// shortest forms of neighbouring floats may differ in length: the
		// shorter one says how precise the printing is
		digits := min(significantDigits(ws[i]), significantDigits(gs[i]))
		if math.Abs(w-g) > 100*math.Pow(10, -float64(digits-1))*math.Abs(w) {
			return false
		}
	}
	return true
}

// significantDigits counts the digits of a printed number's mantissa,
// leading zeros left out.
func significantDigits(s string) int {
	mantissa, _, _ := strings.Cut(strings.TrimLeft(s, "-0."), "e")
	return len(strings.ReplaceAll(mantissa, ".", ""))
}

func TestSameUpToLastDigits(t *testing.T) {
	assert.True(t, sameUpToLastDigits("x = [0.739223371592766, 2.27]", "x = [0.7392233715927661, 2.27]"))
	assert.True(t, sameUpToLastDigits("-0.30215514174002644 1e-07", "-0.3021551417400263 1e-07"))
	assert.False(t, sameUpToLastDigits("0.739223371592766", "0.739223371612766"), "a difference past the last two digits")
	assert.False(t, sameUpToLastDigits("rank 0: 1.5", "rank 1: 1.5"), "the text around the numbers")
	assert.False(t, sameUpToLastDigits("1.5, 2.5", "1.5"), "a number missing")
}
