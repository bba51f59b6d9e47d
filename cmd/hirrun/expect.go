package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
)

// expectation is one --expect comparison: an output and its reference.
type expectation struct {
	out    *ir.Value
	source string // the reference's file, "case.npz[y]" for an archive's array
	ref    host.Stored
	tol    host.Tolerance
}

// tolFlag is --rtol or --atol: a non-negative number, or unset (the
// output dtype's default).
type tolFlag struct {
	v   float64
	set bool
}

func (f *tolFlag) String() string {
	if !f.set {
		return "per dtype"
	}
	return strconv.FormatFloat(f.v, 'g', -1, 64)
}

func (f *tolFlag) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("want a finite number >= 0")
	}
	f.v, f.set = v, true
	return nil
}

// tolerance is the tolerance for an output of dtype dt: the dtype's
// default, with --rtol and --atol put in where given.
func (o *runOptions) tolerance(dt ir.DType) host.Tolerance {
	tol := host.DefaultTolerance(dt)
	if o.rtol.set {
		tol.Rtol = o.rtol.v
	}
	if o.atol.set {
		tol.Atol = o.atol.v
	}
	return tol
}

// loadExpectations reads every reference and checks it against its
// output's declared type, before the run. An archive (.npz or
// .safetensors) compares every output one of its arrays is named after;
// arrays named after an input are skipped (one archive may hold a whole
// case), any other name is an error.
func loadExpectations(prog *ir.Program, specs []spec, o *runOptions) ([]expectation, error) {
	var exps []expectation
	given := map[string]spec{}
	add := func(s spec, out *ir.Value, source string, st host.Stored) error {
		if prev, ok := given[out.Name]; ok {
			return fmt.Errorf("%s is also compared by --expect %s", out, prev)
		}
		given[out.Name] = s
		t := out.Tensor()
		if t == nil {
			return fmt.Errorf("output %s is not a tensor", out)
		}
		if err := fitReference(out, t, st); err != nil {
			return err
		}
		exps = append(exps, expectation{out: out, source: source, ref: st, tol: o.tolerance(t.DType)})
		return nil
	}
	for _, s := range specs {
		if s.name != "" {
			st, err := host.ReadStoredNPYFile(s.value)
			if errors.Is(err, fs.ErrNotExist) {
				err = errors.New("no such file")
			}
			if err == nil {
				err = add(s, outputValue(prog, s.name), s.value, st)
			}
			if err != nil {
				return nil, fmt.Errorf("--expect %s: %v", s, err)
			}
			continue
		}
		if err := loadArchiveExpectations(prog, s, add); err != nil {
			return nil, err
		}
	}
	return exps, nil
}

func loadArchiveExpectations(prog *ir.Program, s spec, add func(spec, *ir.Value, string, host.Stored) error) error {
	z, err := openArchive(s.value)
	if err != nil {
		return fmt.Errorf("--expect %s: %v", s, err)
	}
	defer z.Close()
	file, member := archiveWords(s.value)
	compared := 0
	for _, name := range z.Names() {
		out := outputValue(prog, name)
		if out == nil {
			if prog.Input(name) != nil {
				continue
			}
			return fmt.Errorf("--expect %s: the %s's %s %q names no output of the program (its outputs: %s)%s", s, file, member, name, valueList(prog.Outputs), didYouMean(name, prog.Outputs))
		}
		st, err := z.Read(name)
		if err == nil {
			err = add(s, out, fmt.Sprintf("%s[%s]", s.value, name), st)
		}
		if err != nil {
			return fmt.Errorf("--expect %s: %s %s: %v", s, member, name, err)
		}
		compared++
	}
	if compared == 0 {
		return fmt.Errorf("--expect %s: the %s holds no %s named after an output (its outputs: %s; its %ss: %s)", s, file, member, valueList(prog.Outputs), member, arrayNames(z.Names()))
	}
	return nil
}

// fitReference says how a reference does not fit output out of type t:
// it must hold the whole logical tensor in the output's dtype, as a file
// for an input of that type would (a bf16 output's may be <f4, compared
// as it is, or bf16 bits).
func fitReference(out *ir.Value, t *ir.TensorType, st host.Stored) error {
	a := st.Array
	if a.DType != t.DType && !(a.DType == ir.F32 && t.DType == ir.BF16) {
		return fmt.Errorf("dtype: reference is %s, output %s is %s", st.DTypeText(), out, t.DType)
	}
	if !slices.Equal(a.Shape, t.Shape()) {
		return fmt.Errorf("shape: reference is %s, output %s is %s (the whole logical tensor is compared)", a.TypeString(), out, t)
	}
	return nil
}

// checkExpectations compares each output with its reference after the run
// and prints a line per comparison; it reports whether any failed.
func (c *cli) checkExpectations(prog *ir.Program, res *evaluator.Result, exps []expectation) (failed bool) {
	var bad []string
	for _, e := range exps {
		verdict, ok := compareOutput(prog, res, e)
		status := "ok"
		if !ok {
			status = "MISMATCH"
			bad = append(bad, e.out.String())
		}
		fmt.Fprintf(c.stdout, "check %s against %s: %s, %s\n", e.out, e.source, status, verdict)
	}
	if len(bad) > 0 {
		c.errorf("run: %d of %d --expect check%s failed: %s", len(bad), len(exps), plural(len(exps)), strings.Join(bad, ", "))
	}
	return len(bad) > 0
}

// compareOutput compares one output with its reference: what it found,
// and whether the output passed.
func compareOutput(prog *ir.Program, res *evaluator.Result, e expectation) (string, bool) {
	got, err := logicalOutput(prog, res, e.out.Name)
	if err != nil {
		return err.Error(), false
	}
	// The output's type was checked before the run; the result is
	// checked too, so a runtime that returned something else says so.
	if t := ir.Tensor(got.DType, got.Shape...); fitReference(e.out, t, e.ref) != nil {
		return fitReference(e.out, t, e.ref).Error(), false
	}
	cl, err := host.Compare(got, e.ref.Array, e.tol)
	if err != nil {
		return err.Error(), false
	}
	return cl.String(e.tol), cl.Mismatches == 0
}
