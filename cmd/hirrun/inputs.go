package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
)

// inputSource is where an input's value comes from: its own spec, or an
// array of an archive.
type inputSource struct {
	spec    spec
	archive archive // nil for NAME=VALUE
}

// archive is a file of named arrays, given whole and matched by its
// arrays' names: an .npz archive (host.NPZ) or a .safetensors file
// (host.SafeTensors).
type archive interface {
	Names() []string
	Read(name string) (host.Stored, error)
	Close() error
}

// isArchive reports whether path names an archive by its extension.
func isArchive(path string) bool {
	return hasExt(path, ".npz") || hasExt(path, ".safetensors")
}

// archiveWords are what messages call an archive at path and its members:
// an .npz archive's arrays, a .safetensors file's tensors.
func archiveWords(path string) (file, member string) {
	if hasExt(path, ".safetensors") {
		return "file", "tensor"
	}
	return "archive", "array"
}

// archiveGivenWhole says that NAME=path, an archive, is refused, and how
// to give it (flagName: input, output or expect).
func archiveGivenWhole(flagName, path string) error {
	kind, member := "an .npz archive", "array"
	if hasExt(path, ".safetensors") {
		kind, member = "a .safetensors file", "tensor"
	}
	return fmt.Errorf("%s is given whole (--%s %s) and matched by its %ss' names; for one array, give NAME=FILE.npy", kind, flagName, path, member)
}

// loadInputs makes the logical tensor of every program input from the
// specs: every input needs a value, and every NAME= must name an input.
// An archive (.npz or .safetensors) gives each input one of its arrays is
// named after; arrays named after an output are skipped (one archive may
// hold a whole case, for --input and --expect alike), any other name is
// an error. Inputs too large for the host's memory are an
// *runtime.OutOfMemoryError (inputStatus: exit status 1).
func loadInputs(prog *ir.Program, specs []spec) (map[string]*host.Array, error) {
	src := map[string]inputSource{}
	for _, s := range specs {
		if s.name == "" {
			continue
		}
		if prog.Input(s.name) == nil {
			return nil, fmt.Errorf("--input %s: the program has no input %%%s (its inputs: %s)%s", s.name, s.name, valueList(prog.Inputs), didYouMean(s.name, prog.Inputs))
		}
		src[s.name] = inputSource{spec: s}
	}
	for _, s := range specs {
		if s.name != "" {
			continue
		}
		z, err := openArchive(s.value)
		if err != nil {
			return nil, fmt.Errorf("--input %s: %v", s, err)
		}
		defer z.Close()
		file, member := archiveWords(s.value)
		given := 0
		for _, name := range z.Names() {
			if prog.Input(name) == nil {
				if outputValue(prog, name) != nil {
					continue
				}
				return nil, fmt.Errorf("--input %s: the %s's %s %q names no input of the program (its inputs: %s)%s", s, file, member, name, valueList(prog.Inputs), didYouMean(name, prog.Inputs))
			}
			if prev, ok := src[name]; ok {
				return nil, fmt.Errorf("--input %s: %%%s is also given by --input %s", s, name, prev.spec)
			}
			src[name] = inputSource{spec: s, archive: z}
			given++
		}
		if given == 0 {
			return nil, fmt.Errorf("--input %s: the %s holds no %s named after an input (its inputs: %s; its %ss: %s)", s, file, member, valueList(prog.Inputs), member, arrayNames(z.Names()))
		}
	}
	var missing []string
	first := ""
	for _, in := range prog.Inputs {
		if _, ok := src[in.Name]; !ok {
			missing = append(missing, fmt.Sprintf("%s : %s (declared at %s)", in, in.Type, in.Pos))
			if first == "" {
				first = in.Name
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing input%s %s; give each with --input NAME=random (random values; random:seed=N picks the seed) or --input NAME=FILE.npy, e.g. --input %s=random",
			plural(len(missing)), strings.Join(missing, ", "), first)
	}
	if err := checkInputMemory(prog); err != nil {
		return nil, err
	}
	inputs := map[string]*host.Array{}
	for i, in := range prog.Inputs {
		s := src[in.Name]
		var a *host.Array
		var err error
		if s.archive != nil {
			a, err = archiveInput(in, s.archive, s.spec.value)
		} else {
			a, err = makeInput(in, s.spec.value, uint64(i))
		}
		if err != nil {
			return nil, fmt.Errorf("--input %s: %v", s.spec, err)
		}
		inputs[in.Name] = a
	}
	return inputs, nil
}

// openArchive opens an .npz or .safetensors file, by its extension,
// saying "no such file" plainly.
func openArchive(path string) (archive, error) {
	var (
		z   archive
		err error
	)
	if hasExt(path, ".safetensors") {
		var st *host.SafeTensors
		if st, err = host.OpenSafeTensors(path); err == nil {
			z = st
		}
	} else {
		var npz *host.NPZ
		if npz, err = host.OpenNPZ(path); err == nil {
			z = npz
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("no such file")
	}
	return z, err
}

// makeInput builds input in's logical tensor from a spec's value; random
// without a seed is seeded with position, the input's place among the
// program's inputs, so that no two inputs get the same values.
func makeInput(in *ir.Value, value string, position uint64) (*host.Array, error) {
	t := in.Tensor()
	if value == "random" || strings.HasPrefix(value, "random:") {
		seed, err := parseRandom(value, position)
		if err != nil {
			return nil, err
		}
		return host.Random(t.DType, t.Shape(), seed), nil
	}
	if isArchive(value) {
		return nil, archiveGivenWhole("input", value)
	}
	st, err := host.ReadStoredNPYFile(value)
	if errors.Is(err, fs.ErrNotExist) {
		if r, ok := meantRandom(value); ok {
			return nil, fmt.Errorf("no such file; did you mean %s=%s (random values)?", in.Name, r)
		}
		return nil, errors.New("no such file")
	}
	if err != nil {
		return nil, err
	}
	return fitInput(in, st)
}

// archiveInput reads input in's array from the archive at path.
func archiveInput(in *ir.Value, z archive, path string) (*host.Array, error) {
	st, err := z.Read(in.Name)
	if err != nil {
		return nil, err
	}
	a, err := fitInput(in, st)
	if err != nil {
		_, member := archiveWords(path)
		return nil, fmt.Errorf("%s %s: %v", member, in.Name, err)
	}
	return a, nil
}

// fitInput checks that a file's array is input in's logical tensor. A bf16
// input may be given as <f4 (NumPy has no bf16), rounded to nearest even,
// or as raw bits, which host reads as bf16 already.
func fitInput(in *ir.Value, st host.Stored) (*host.Array, error) {
	t := in.Tensor()
	a := st.Array
	if a.DType == ir.F32 && t.DType == ir.BF16 {
		a = a.Convert(ir.BF16)
	}
	if a.DType != t.DType {
		return nil, fmt.Errorf("dtype: the file holds %s but %s is declared %s", st.DTypeText(), in, t)
	}
	if !slices.Equal(a.Shape, t.Shape()) {
		return nil, fmt.Errorf("shape: the file holds %s but %s is declared %s (the whole logical tensor is wanted)", st.Array.TypeString(), in, t)
	}
	return a, nil
}

// parseRandom reads "random" or "random:seed=N". Without a seed it is
// seed, the input's position (documented in run's help): the values are
// reproducible either way, and two inputs given as random differ.
func parseRandom(value string, seed uint64) (uint64, error) {
	opts, _ := strings.CutPrefix(value, "random")
	if opts == "" {
		return seed, nil
	}
	opts, _ = strings.CutPrefix(opts, ":")
	for _, opt := range strings.Split(opts, ",") {
		if opt == "" {
			return 0, errors.New("empty random option (want random alone, or random:seed=N)")
		}
		key, v, _ := strings.Cut(opt, "=")
		if key != "seed" {
			return 0, fmt.Errorf("unknown random option %q (want random:seed=N)", opt)
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("seed %s is out of range (at most %d)", v, uint64(math.MaxUint64))
		}
		if err != nil {
			return 0, fmt.Errorf("seed %q is not a non-negative integer", v)
		}
		seed = n
	}
	return seed, nil
}
