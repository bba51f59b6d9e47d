package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	hirparser "github.com/hirlab/hir/parser"
)

// TestGoldenOnBackend runs every succeeding testdata program on another
// backend and compares its outputs with the CPU runtime's golden: the same
// ranks, names, dtypes and shapes, and every number within a tolerance of
// its dtype (GPU math and summation order may differ in the last bits). It
// needs a GPU, so it runs only when asked, from scripts/device-run.sh:
//
//	HIR_GOLDEN_BACKEND=cuda HIRRUN=.device-bin/hirrun HIR_GOLDEN_MAX_RANKS=2 hirrun.test -test.run GoldenOnBackend
//
// Programs whose mesh has more ranks than HIR_GOLDEN_MAX_RANKS are skipped;
// with HIR_CUDA_SHARE_GPUS=1 ranks beyond HIR_GOLDEN_GPUS share GPUs, and
// programs that use NCCL (which refuses that) are skipped then.
func TestGoldenOnBackend(t *testing.T) {
	backend := os.Getenv("HIR_GOLDEN_BACKEND")
	if backend == "" {
		t.Skip("set HIR_GOLDEN_BACKEND=cuda and HIRRUN=path/to/hirrun to compare the testdata goldens with another backend (scripts/device-run.sh does, on a GPU machine)")
	}
	bin := os.Getenv("HIRRUN")
	require.NotEmpty(t, bin, "HIRRUN must name the hirrun binary to run")
	bin, err := filepath.Abs(bin)
	require.NoError(t, err)
	maxRanks := 0
	if s := os.Getenv("HIR_GOLDEN_MAX_RANKS"); s != "" {
		maxRanks, err = strconv.Atoi(s)
		require.NoError(t, err, "HIR_GOLDEN_MAX_RANKS=%q", s)
	}
	programs := append(testdataPrograms(t), contractPrograms(t)...)
	for _, p := range programs {
		if !p.ok() {
			continue
		}
		t.Run(strings.TrimSuffix(p.name, ".hir"), func(t *testing.T) {
			prog, err := hirparser.Parse(p.name, p.src)
			require.NoError(t, err)
			if n := prog.Mesh.Size(); maxRanks > 0 && n > maxRanks {
				t.Skipf("needs %d ranks; at most %d run here", n, maxRanks)
			}
			// Ranks beyond the GPUs share them (HIR_CUDA_SHARE_GPUS=1), which
			// NCCL refuses.
			if gpus, _ := strconv.Atoi(os.Getenv("HIR_GOLDEN_GPUS")); gpus > 0 && prog.Mesh.Size() > gpus && bytes.Contains(p.src, []byte("algo=nccl")) {
				t.Skipf("needs %d GPUs for NCCL; this machine has %d", prog.Mesh.Size(), gpus)
			}
			var stdout, stderr bytes.Buffer
			if out, ok := savedRun(t, os.Getenv("HIR_GOLDEN_OUTPUTS"), p.name); ok {
				stdout.WriteString(out)
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				file := "testdata/" + p.name
				args := append(append([]string{"run", "--backend", backend}, argsLine(p.src)...), file)
				cmd := exec.CommandContext(ctx, bin, args...)
				cmd.Dir = "../.."
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				start := time.Now()
				err = cmd.Run()
				t.Logf("hirrun %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
				require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
			_, want, _ := strings.Cut(p.golden, "-- stdout --\n")
			want, _, _ = strings.Cut(want, "-- stderr --\n")
			// compareOutputs holds the per-dtype tolerance; its error names the value.
			assert.NoError(t, compareOutputs(want, stdout.String()), "got:\n%s\nwant (CPU golden):\n%s", stdout.String(), want)
		})
	}
}

// savedRun is what scripts/device-run.sh's exact step saved of program
// name's run on the backend, in dir (HIR_GOLDEN_OUTPUTS): NAME.out, .err
// and .rc, NAME its path under testdata without .hir, "/" spelt "_". A
// program that step did not run (out of time, say) or whose run it timed
// out is run here instead (false); one whose run failed otherwise fails
// the test with its stderr. So the
// device call runs each program once, not once per step.
func savedRun(t *testing.T, dir, name string) (string, bool) {
	if dir == "" {
		return "", false
	}
	base := filepath.Join(dir, strings.ReplaceAll(strings.TrimSuffix(name, ".hir"), "/", "_"))
	rc, err := os.ReadFile(base + ".rc")
	if err != nil || strings.TrimSpace(string(rc)) == "124" { // not run, or timed out there: run it here
		return "", false
	}
	out, err := os.ReadFile(base + ".out")
	require.NoError(t, err)
	errText, _ := os.ReadFile(base + ".err")
	require.Equal(t, "0", strings.TrimSpace(string(rc)), "the saved run failed; stdout:\n%s\nstderr:\n%s", out, errText)
	t.Logf("%s: compared the exact step's saved run", base)
	return string(out), true
}

// compareOutputs compares two `hirrun run` stdouts line by line: the part
// before the values exactly, the values within the dtype's tolerance.
func compareOutputs(want, got string) error {
	lines := func(s string) []string {
		if s = strings.TrimSpace(s); s == "" {
			return nil // a program with no outputs prints nothing
		}
		return strings.Split(s, "\n")
	}
	wl, gl := lines(want), lines(got)
	if len(wl) != len(gl) {
		return fmt.Errorf("%d output lines, want %d", len(gl), len(wl))
	}
	for i := range wl {
		wh, wv, ok1 := splitSummary(wl[i])
		gh, gv, ok2 := splitSummary(gl[i])
		if !ok1 || !ok2 || wh != gh {
			return fmt.Errorf("line %d is %q, want %q", i+1, gl[i], wl[i])
		}
		dtype, _, _ := strings.Cut(wh[strings.LastIndex(wh, " = ")+3:], "[")
		dt, _ := ir.ParseDType(dtype)
		if err := compareValues(dt, wv, gv); err != nil {
			return fmt.Errorf("line %d (%s): %v", i+1, wh, err)
		}
	}
	return nil
}

// splitSummary splits "rank 0: %y = f32[2] = [1, 2]" into its head
// ("rank 0: %y = f32[2]") and values ("[1, 2]").
func splitSummary(line string) (head, values string, ok bool) {
	i := strings.Index(line, "] = ")
	if i < 0 {
		return "", "", false
	}
	return line[:i+1], line[i+4:], true
}

// compareValues compares two value lists of a summary (nested brackets, or
// the first values and statistics of a large array).
func compareValues(dt ir.DType, want, got string) error {
	fields := func(s string) []string {
		s = strings.NewReplacer("[", " ", "]", " ", ",", " ").Replace(s)
		return strings.Fields(s)
	}
	w, g := fields(want), fields(got)
	if len(w) != len(g) {
		return fmt.Errorf("%d values, want %d", len(g), len(w))
	}
	rtol, atol := tolerance(dt)
	if dt.IsFloat() {
		rtol, atol = max(rtol, 2e-5), max(atol, 1e-5) // another summation order
	}
	for i := range w {
		wk, wv, _ := strings.Cut(w[i], "=") // min=..., or a plain value
		gk, gv, _ := strings.Cut(g[i], "=")
		if !strings.Contains(w[i], "=") {
			wk, wv, gk, gv = "", w[i], "", g[i]
		}
		if wk != gk {
			return fmt.Errorf("value %d is %s, want %s", i, g[i], w[i])
		}
		x, errW := strconv.ParseFloat(wv, 64)
		y, errG := strconv.ParseFloat(gv, 64)
		if errW != nil || errG != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			if wv != gv {
				return fmt.Errorf("value %d is %s, want %s", i, g[i], w[i])
			}
			continue
		}
		if math.Abs(x-y) > atol+rtol*math.Abs(x) {
			return fmt.Errorf("value %d is %s, want %s", i, g[i], w[i])
		}
	}
	return nil
}

// TestCompareOutputs checks the comparison the GPU run relies on, here.
func TestCompareOutputs(t *testing.T) {
	want := "rank 0: %y = f32[2, 2] = [[1, 2.5], [-0.25, nan]]\nrank 0: %b = bool[2] = [true, false]\nrank 0: %s = i64[] = 7\n" +
		"rank 1: %l = f32[64] = [0.5, -0.25, 1, 1, 1, 1, 1, 1, ...] min=-0.99 max=0.98 mean=0.0012 sum=4.9\n"
	require.NoError(t, compareOutputs(want, want), "equal outputs differ")
	near := strings.Replace(want, "2.5", "2.5000001", 1)
	assert.NoError(t, compareOutputs(want, near), "a last-bit difference is within tolerance")
	for _, bad := range []string{
		strings.Replace(want, "2.5", "2.6", 1),
		strings.Replace(want, "nan", "0", 1),
		strings.Replace(want, "true", "false", 1),
		strings.Replace(want, "= 7", "= 8", 1),
		strings.Replace(want, "f32[2, 2]", "f16[2, 2]", 1),
		strings.Replace(want, "sum=4.9", "sum=5.9", 1),
		strings.Replace(want, "rank 1:", "rank 2:", 1),
		strings.Replace(want, "\nrank 0: %s = i64[] = 7", "", 1),
	} {
		assert.Error(t, compareOutputs(want, bad), "no difference found in:\n%s", bad)
	}
}
