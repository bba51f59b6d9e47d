package main

// hirrun's command-line behaviour is tested by the scripts in
// testdata/script/*.txtar, run by testscript
// (github.com/rogpeppe/go-internal/testscript): each is a list of commands
// and the files they work on, run in a fresh directory, in parallel with
// the others. Beyond testscript's own commands (exists, stdout, stderr,
// cmp, stdin, env, ...; see its documentation) the scripts have:
//
//	hirrun ARGS...         run hirrun; it must exit 0
//	! hirrun ARGS...       ...it must fail; the next line says how:
//	status N               the exit status of the last hirrun was N
//	writenpy FILE TYPE V...  write an NPY file: writenpy x.npy f32[2,3] 1 2 3 4 5 6
//	writenpz FILE NAME=NPY...  pack NPY files into an NPZ archive
//	catnpy FILE            print an NPY file's or NPZ archive's arrays as hirrun does
//
// and the conditions [cuda] (the cuda backend can run here) and [root].
// $TESTDATA is this directory's testdata, $REPO the repository's root.
// `go test ./cmd/hirrun -run Scripts/NAME` runs one script;
// -update rewrites the files a script compares against with cmp.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime/cuda"
)

const scriptDir = "testdata/script"

func TestScripts(t *testing.T) {
	// The scripts run this test binary as hirrun: TestMain hands it to
	// run() when envAsHirrun is set, as main() would.
	exe, err := os.Executable()
	require.NoError(t, err)
	testdata, err := filepath.Abs("testdata")
	require.NoError(t, err)
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	gpu := cuda.Probe().Available

	testscript.Run(t, testscript.Params{
		Dir:                scriptDir,
		RequireUniqueNames: true,
		UpdateScripts:      *update,
		Setup: func(env *testscript.Env) error {
			env.Setenv(envAsHirrun, "1")
			if os.Getenv("GORACE") == "" {
				// a -race hirrun otherwise sleeps 1 s as it exits
				env.Setenv("GORACE", "atexit_sleep_ms=10")
			}
			env.Setenv("TESTDATA", testdata)
			env.Setenv("REPO", repo)
			env.Values[lastRunKey{}] = &lastRun{}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "cuda":
				return gpu, nil
			case "root":
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q (the scripts' own are cuda and root)", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"hirrun":   hirrunCmd(exe),
			"status":   statusCmd,
			"writenpy": writeNPYCmd,
			"writenpz": writeNPZCmd,
			"catnpy":   catNPYCmd,
		},
	})
}

// lastRun is what a script's last hirrun did, for status.
type lastRun struct {
	ran    bool
	status int
}

type lastRunKey struct{}

func hirrunCmd(exe string) func(ts *testscript.TestScript, neg bool, args []string) {
	return func(ts *testscript.TestScript, neg bool, args []string) {
		last := ts.Value(lastRunKey{}).(*lastRun)
		err := ts.Exec(exe, args...) // stdin, stdout and stderr as exec's
		status := 0
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			status = exit.ExitCode()
		case err != nil:
			ts.Fatalf("hirrun: %v", err)
		}
		*last = lastRun{ran: true, status: status}
		if status != 0 && !neg {
			ts.Fatalf("hirrun exited %d, want 0", status)
		}
		if status == 0 && neg {
			ts.Fatalf("hirrun succeeded, want a failure")
		}
	}
}

// statusCmd checks the last hirrun's exit status: testscript's own
// negation tells only zero from non-zero, and hirrun's 1 (the program
// failed) and 2 (the command line is wrong) mean different things.
func statusCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: status N")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	last := ts.Value(lastRunKey{}).(*lastRun)
	if !last.ran {
		ts.Fatalf("status: no hirrun ran before")
	}
	if last.status != want {
		ts.Fatalf("hirrun exited %d, want %d", last.status, want)
	}
}

// writeNPYCmd: writenpy FILE DTYPE[DIMS] VALUES..., the values row-major,
// as many as the shape holds (nan and inf allowed).
func writeNPYCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: writenpy FILE DTYPE[DIMS] VALUE...")
	}
	dt, shape, err := parseArrayType(args[1])
	ts.Check(err)
	a := host.New(dt, shape)
	values := args[2:]
	if int64(len(values)) != a.Len() {
		ts.Fatalf("writenpy: %s holds %d values, got %d", args[1], a.Len(), len(values))
	}
	for i, v := range values {
		f, err := strconv.ParseFloat(v, 64)
		ts.Check(err)
		a.Set(int64(i), f)
	}
	ts.Check(a.WriteNPYFile(ts.MkAbs(args[0])))
}

// parseArrayType reads "f32[2,3]" (no spaces: it is one script argument).
func parseArrayType(s string) (ir.DType, []int64, error) {
	name, dims, ok := strings.Cut(s, "[")
	dims, closed := strings.CutSuffix(dims, "]")
	dt, known := ir.ParseDType(name)
	if !ok || !closed || !known {
		return 0, nil, fmt.Errorf("%q: want DTYPE[DIMS], e.g. f32[2,3]", s)
	}
	shape := []int64{}
	for d := range strings.SplitSeq(dims, ",") {
		if d == "" {
			continue
		}
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 {
			return 0, nil, fmt.Errorf("%q: extent %q is not a non-negative integer", s, d)
		}
		shape = append(shape, n)
	}
	return dt, shape, nil
}

// writeNPZCmd: writenpz FILE NAME=FILE.npy..., the members in that order.
func writeNPZCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: writenpz FILE NAME=FILE.npy...")
	}
	var names []string
	var arrays []*host.Array
	for _, arg := range args[1:] {
		name, path, ok := strings.Cut(arg, "=")
		if !ok {
			ts.Fatalf("writenpz: %q: want NAME=FILE.npy", arg)
		}
		a, err := host.ReadNPYFile(ts.MkAbs(path))
		ts.Check(err)
		names, arrays = append(names, name), append(arrays, a)
	}
	ts.Check(host.WriteNPZFile(ts.MkAbs(args[0]), names, arrays))
}

// catNPYCmd: catnpy FILE prints an .npy file's array, or each member of an
// .npz archive as "name: ...", in hirrun's own summary form.
func catNPYCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: catnpy FILE")
	}
	path := ts.MkAbs(args[0])
	if !strings.HasSuffix(path, ".npz") {
		a, err := host.ReadNPYFile(path)
		ts.Check(err)
		fmt.Fprintln(ts.Stdout(), a.Summary())
		return
	}
	z, err := host.OpenNPZ(path)
	ts.Check(err)
	defer z.Close()
	for _, name := range z.Names() {
		s, err := z.Read(name)
		ts.Check(err)
		fmt.Fprintf(ts.Stdout(), "%s: %s\n", name, s.Array.Summary())
	}
}
