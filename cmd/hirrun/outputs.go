package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
)

// checkOutputPaths checks, before the run, that every --output file can be
// written: its directory exists and takes new files (an existing file must
// be a writable regular file), and no two outputs go to the same file.
func checkOutputPaths(specs []spec) error {
	seen := map[string]spec{}
	for _, s := range specs {
		abs, err := filepath.Abs(s.value)
		if err != nil {
			return fmt.Errorf("--output %s: %v", s, err)
		}
		if prev, ok := seen[abs]; ok {
			return fmt.Errorf("--output %s and --output %s write the same file", prev, s)
		}
		seen[abs] = s
		if err := checkWritable(s.value); err != nil {
			return fmt.Errorf("--output %s: %v", s, err)
		}
	}
	return nil
}

// checkWritable says why path cannot be written, or nil. It leaves an
// existing file as it is.
func checkWritable(path string) error {
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s exists and is not a regular file", path)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0) // no O_TRUNC: a check only
		if err != nil {
			return fmt.Errorf("cannot write %s: %v", path, pathErr(err))
		}
		return f.Close()
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the directory %s does not exist", dir)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".hirrun-check-*")
	if err != nil {
		return fmt.Errorf("cannot create files in the directory %s: %v", dir, pathErr(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// pathErr is err without the path an *fs.PathError repeats.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// writeOutputs saves the logical tensors --output asked for: one to each
// NAME=FILE.npy, every output to each FILE.npz or FILE.safetensors.
func (c *cli) writeOutputs(prog *ir.Program, res *evaluator.Result, specs []spec) int {
	for _, s := range specs {
		var err error
		if s.name == "" {
			err = writeArchive(prog, res, s.value)
		} else {
			var a *host.Array
			if a, err = logicalOutput(prog, res, s.name); err == nil {
				err = a.WriteNPYFile(s.value)
			}
		}
		if err != nil {
			c.errorf("run: --output %s: %v", s, err)
			return exitFail
		}
	}
	return exitOK
}

// writeArchive saves every output of prog to path, under its name: an
// .npz archive (np.savez's bytes), or a .safetensors file (the bytes
// safetensors.torch.save_file writes, with no metadata; bf16 as BF16).
func writeArchive(prog *ir.Program, res *evaluator.Result, path string) error {
	names := make([]string, len(prog.Outputs))
	arrays := make([]*host.Array, len(prog.Outputs))
	for i, out := range prog.Outputs {
		a, err := logicalOutput(prog, res, out.Name)
		if err != nil {
			return err
		}
		names[i], arrays[i] = out.Name, a
	}
	if hasExt(path, ".safetensors") {
		return host.WriteSafeTensorsFile(path, names, arrays, nil)
	}
	return host.WriteNPZFile(path, names, arrays)
}

// logicalOutput is output name's logical tensor, assembled from the ranks'
// shards.
func logicalOutput(prog *ir.Program, res *evaluator.Result, name string) (*host.Array, error) {
	a, err := res.Logical(prog, name)
	if err == nil && a == nil {
		err = fmt.Errorf("output %%%s was not produced", name)
	}
	return a, err
}
