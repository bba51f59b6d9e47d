package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
)

// .safetensors files as --input, --output and --expect archives: the
// functions behind the flags, given the specs parseSpecs makes of
// `--input case.safetensors` (an archive: no name).

const safetensorsSrc = `mesh 2
input %x : f32[4/DIDx, 3]
input %w : bf16[3]
input %h : f16[2]
input %d : f64[2]
input %i : i32[2]
input %k : i64[2]
input %m : bool[2]
%c = cast %w dtype=f32
%y = mul %x, %c
%b = mul %w, %w
%k2 = add %k, 1
output %y, %b, %h, %d, %i, %k2, %m
`

// lowered parses and lowers src.
func lowered(t *testing.T, src string) *ir.Program {
	t.Helper()
	prog, err := parser.Parse("p.hir", []byte(src))
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	return prog
}

// runOnSim runs prog once on the CPU runtime.
func runOnSim(t *testing.T, prog *ir.Program, inputs map[string]*host.Array) *evaluator.Result {
	t.Helper()
	rt, err := runtime.Open("sim", runtime.Config{WorldSize: prog.Mesh.Size(), Devices: prog.Mesh.Devices, Rank: -1})
	require.NoError(t, err)
	defer rt.Close()
	job, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	require.NoError(t, err)
	defer job.Close()
	res, err := job.Run(inputs)
	require.NoError(t, err)
	return res
}

// safetensorsInputs are values for safetensorsSrc's inputs.
func safetensorsInputs() ([]string, []*host.Array) {
	return []string{"x", "w", "h", "d", "i", "k", "m"}, []*host.Array{
		host.Random(ir.F32, []int64{4, 3}, 1),
		host.Random(ir.BF16, []int64{3}, 2),
		host.Random(ir.F16, []int64{2}, 3),
		host.Random(ir.F64, []int64{2}, 4),
		host.Random(ir.I32, []int64{2}, 5),
		host.Random(ir.I64, []int64{2}, 6),
		host.Random(ir.Bool, []int64{2}, 7),
	}
}

func TestSafeTensorsInputOutputExpect(t *testing.T) {
	prog := lowered(t, safetensorsSrc)
	dir := t.TempDir()
	names, arrays := safetensorsInputs()
	want := map[string]*host.Array{}
	for i, n := range names {
		want[n] = arrays[i]
	}

	// One file gives every input, bf16 as its bits; a tensor named after
	// an output (%y) is skipped.
	casePath := filepath.Join(dir, "case.safetensors")
	require.NoError(t, host.WriteSafeTensorsFile(casePath, append(names, "y"), append(arrays, arrays[0]), map[string]string{"format": "pt"}))
	inputs, err := loadInputs(prog, []spec{{"", casePath}})
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff(want, inputs), "inputs (-want +got)")

	// --output out.safetensors: every output, bf16 as BF16.
	res := runOnSim(t, prog, inputs)
	outPath := filepath.Join(dir, "out.safetensors")
	require.NoError(t, writeArchive(prog, res, outPath))
	out, err := host.OpenSafeTensors(outPath)
	require.NoError(t, err)
	defer out.Close()
	assert.Equal(t, []string{"b", "d", "h", "i", "k2", "m", "y"}, out.Names())
	assert.Nil(t, out.Metadata())
	for _, o := range prog.Outputs {
		logical, err := res.Logical(prog, o.Name)
		require.NoError(t, err)
		st, err := out.Read(o.Name)
		require.NoError(t, err)
		assert.Empty(t, cmp.Diff(logical, st.Array), "%s (-want +got)", o.Name)
	}
	st, err := out.Read("b")
	require.NoError(t, err)
	assert.Equal(t, "BF16", st.Descr, "a bf16 output is saved as BF16")
	// The same outputs, saved again, give the same bytes.
	again := filepath.Join(dir, "again.safetensors")
	require.NoError(t, writeArchive(prog, res, again))
	a, err := os.ReadFile(outPath)
	require.NoError(t, err)
	b, err := os.ReadFile(again)
	require.NoError(t, err)
	assert.Equal(t, a, b)

	// --expect out.safetensors passes; a case file whose %y is wrong at
	// [3, 1] fails there, its inputs skipped.
	o := &runOptions{}
	exps, err := loadExpectations(prog, []spec{{"", outPath}}, o)
	require.NoError(t, err)
	require.Len(t, exps, len(prog.Outputs))
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr}
	assert.False(t, c.checkExpectations(prog, res, exps), stdout.String())
	assert.Contains(t, stdout.String(), "check %b against "+outPath+"[b]: ok, 3 elements within rtol 0.016, atol 1e-05")

	yRef, err := res.Logical(prog, "y")
	require.NoError(t, err)
	yRef = yRef.Clone()
	yRef.Set(10, yRef.At(10)+1)
	wrongPath := filepath.Join(dir, "wrong.safetensors")
	require.NoError(t, host.WriteSafeTensorsFile(wrongPath, append(names, "y"), append(arrays, yRef), nil))
	exps, err = loadExpectations(prog, []spec{{"", wrongPath}}, o)
	require.NoError(t, err)
	require.Len(t, exps, 5, "%y, and the inputs the program outputs as they are; not %x, %w, %k")
	stdout.Reset()
	stderr.Reset()
	assert.True(t, c.checkExpectations(prog, res, exps))
	assert.Contains(t, stdout.String(), "check %y against "+wrongPath+"[y]: MISMATCH, 1 of 12 elements differ")
	assert.Contains(t, stdout.String(), "the first at [3, 1]")
	assert.Contains(t, stdout.String(), "check %m against "+wrongPath+"[m]: ok")
	assert.Equal(t, "hirrun: run: 1 of 5 --expect checks failed: %y\n", stderr.String())
}

func TestSafeTensorsMistakes(t *testing.T) {
	prog := lowered(t, safetensorsSrc)
	dir := t.TempDir()
	names, arrays := safetensorsInputs()
	save := func(file string, names []string, arrays []*host.Array) string {
		path := filepath.Join(dir, file)
		require.NoError(t, host.WriteSafeTensorsFile(path, names, arrays, nil))
		return path
	}
	good := save("good.safetensors", names, arrays)
	stray := save("stray.safetensors", append(names, "q"), append(arrays, arrays[0]))
	outs := save("outs.safetensors", []string{"y"}, arrays[:1])
	wide := save("wide.safetensors", append([]string{"x"}, names[1:]...), append([]*host.Array{arrays[0].Convert(ir.F64)}, arrays[1:]...))
	short := save("short.safetensors", append([]string{"x"}, names[1:]...), append([]*host.Array{host.Random(ir.F32, []int64{2, 3}, 1)}, arrays[1:]...))
	rest := save("rest.safetensors", names[1:], arrays[1:])
	u8 := filepath.Join(dir, "u8.safetensors")
	header := `{"x":{"dtype":"U8","shape":[4,3],"data_offsets":[0,12]}}` // 56 bytes: no padding
	u8File := append(binary.LittleEndian.AppendUint64(nil, uint64(len(header))), header...)
	require.NoError(t, os.WriteFile(u8, append(u8File, make([]byte, 12)...), 0o644))
	cut, err := os.ReadFile(good)
	require.NoError(t, err)
	truncated := filepath.Join(dir, "truncated.safetensors")
	require.NoError(t, os.WriteFile(truncated, cut[:len(cut)-1], 0o644))

	for _, tc := range []struct {
		specs []spec
		want  string
	}{
		{[]spec{{"", stray}}, `--input ` + stray + `: the file's tensor "q" names no input of the program (its inputs: %x, %w, %h, %d, %i, %k, %m)`},
		{[]spec{{"", outs}}, `--input ` + outs + `: the file holds no tensor named after an input (its inputs: %x, %w, %h, %d, %i, %k, %m; its tensors: y)`},
		{[]spec{{"", wide}}, `--input ` + wide + `: tensor x: dtype: the file holds F64 (f64) but %x is declared f32[4/DIDx, 3]`},
		{[]spec{{"", short}}, `--input ` + short + `: tensor x: shape: the file holds f32[2, 3] but %x is declared f32[4/DIDx, 3] (the whole logical tensor is wanted)`},
		{[]spec{{"", u8}, {"", good}}, `--input ` + good + `: %x is also given by --input ` + u8},
		{[]spec{{"", u8}, {"", rest}}, `--input ` + u8 + `: ` + u8 + `: tensor x: dtype U8 is not supported (hir reads BF16 F16 F32 F64 I32 I64 BOOL)`},
		{[]spec{{"", truncated}}, `--input ` + truncated + `: ` + truncated + `: truncated: tensor "m"'s data_offsets [98, 100] run past the end of the data, which is 99 bytes long`},
		{[]spec{{"", filepath.Join(dir, "missing.safetensors")}}, `--input ` + filepath.Join(dir, "missing.safetensors") + `: no such file`},
		{[]spec{{"x", good}, {"", rest}}, `--input x=` + good + `: a .safetensors file is given whole (--input ` + good + `) and matched by its tensors' names; for one array, give NAME=FILE.npy`},
	} {
		_, err := loadInputs(prog, tc.specs)
		if assert.Error(t, err, "%v", tc.specs) {
			assert.Equal(t, tc.want, err.Error(), "%v", tc.specs)
			assert.Equal(t, exitUsage, inputStatus(err), "%v: a usage error", tc.specs)
		}
	}

	yNPY := filepath.Join(dir, "y.npy")
	require.NoError(t, arrays[0].WriteNPYFile(yNPY))
	o := &runOptions{}
	for _, tc := range []struct {
		specs []spec
		want  string
	}{
		{[]spec{{"", stray}}, `--expect ` + stray + `: the file's tensor "q" names no output of the program (its outputs: %y, %b, %h, %d, %i, %k2, %m)`},
		{[]spec{{"", save("ins.safetensors", names[:2], arrays[:2])}}, `the file holds no tensor named after an output (its outputs: %y, %b, %h, %d, %i, %k2, %m; its tensors: w, x)`},
		{[]spec{{"", save("y64.safetensors", []string{"y"}, []*host.Array{arrays[0].Convert(ir.F64)})}}, `: tensor y: dtype: reference is F64 (f64), output %y is f32`},
		{[]spec{{"", outs}, {"y", yNPY}}, `--expect y=` + yNPY + `: %y is also compared by --expect ` + outs},
	} {
		_, err := loadExpectations(prog, tc.specs, o)
		if assert.Error(t, err, "%v", tc.specs) {
			assert.Contains(t, err.Error(), tc.want, "%v", tc.specs)
		}
	}
}

// Inputs too large for the host are a resource error, exit status 1 as
// on a device, found before any host array is made; other input errors
// are usage errors, 2.
func TestInputsPastHostMemoryAreAResourceError(t *testing.T) {
	t.Setenv("HIR_SIM_MEMORY_LIMIT", "1GiB")
	prog := lowered(t, `mesh 2
input %x : f32[4398046511104/DIDx]
%y = add %x, 1.0
output %y
`)
	_, err := loadInputs(prog, []spec{{"x", "random"}})
	var oom *runtime.OutOfMemoryError
	require.True(t, errors.As(err, &oom), "%v", err)
	assert.Equal(t, "the host", oom.Where)
	assert.Equal(t, int64(16<<40), oom.Asked)
	assert.Equal(t, "out of memory: 16.00 TiB for the inputs (%x: 16.00 TiB) does not fit: the host has a 1.00 GiB limit (set HIR_SIM_MEMORY_LIMIT to change the limit)", err.Error())
	assert.Equal(t, exitFail, inputStatus(err))
	assert.Equal(t, exitFail, inputStatus(errors.Join(errors.New("wrapped"), err)))

	_, err = loadInputs(prog, nil)
	require.Error(t, err)
	assert.Equal(t, exitUsage, inputStatus(err), "a missing input")
}
