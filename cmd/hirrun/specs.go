package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hirlab/hir/ir"
)

// spec is one value of --input, --output or --expect: NAME=VALUE, or a
// whole archive, .npz or .safetensors (name ""), that stands for every
// array in it.
type spec struct{ name, value string }

// String is the spec as the user wrote it (the % of a name aside).
func (s spec) String() string {
	if s.name == "" {
		return s.value
	}
	return s.name + "=" + s.value
}

// specForms says what each flag takes, for its messages.
var specForms = map[string]string{
	"input":  "NAME=random, NAME=random:seed=N, NAME=FILE.npy, or FILE.npz or FILE.safetensors for every input it names",
	"output": "NAME=FILE.npy, or FILE.npz or FILE.safetensors for every output",
	"expect": "NAME=FILE.npy, or FILE.npz or FILE.safetensors for every output it names",
}

// parseSpecs reads the values of the repeatable flag --flagName.
func parseSpecs(flagName string, raw []string) ([]spec, error) {
	var out []spec
	seen := map[string]bool{}
	for _, s := range raw {
		name, value, ok := strings.Cut(s, "=")
		name = strings.TrimPrefix(name, "%")
		switch {
		case !ok && isArchive(s):
			name, value = "", s
		case !ok || name == "" || value == "":
			return nil, fmt.Errorf("--%s %s: want %s", flagName, s, specForms[flagName])
		case isArchive(value):
			return nil, fmt.Errorf("--%s %s: %v", flagName, s, archiveGivenWhole(flagName, value))
		case flagName != "input" && !hasExt(value, ".npy"):
			return nil, fmt.Errorf("--%s %s: want %s (the file must end in .npy)", flagName, s, specForms[flagName])
		}
		key := name
		if name == "" {
			key = "archive " + filepath.Clean(value)
		}
		if seen[key] {
			return nil, fmt.Errorf("--%s %s is given twice", flagName, strings.TrimPrefix(key, "archive "))
		}
		seen[key] = true
		out = append(out, spec{name, value})
	}
	return out, nil
}

func hasExt(path, ext string) bool { return strings.EqualFold(filepath.Ext(path), ext) }

// checkOutputNames checks that every NAME= of --output and --expect names
// an output of prog.
func checkOutputNames(prog *ir.Program, flagName string, specs []spec) error {
	for _, s := range specs {
		if s.name != "" && outputValue(prog, s.name) == nil {
			return fmt.Errorf("--%s %s: the program has no output %%%s (its outputs: %s)%s", flagName, s.name, s.name, valueList(prog.Outputs), didYouMean(s.name, prog.Outputs))
		}
	}
	return nil
}

// arrayNames lists an archive's arrays for a message.
func arrayNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
