//go:build linux

package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hirlab/hir/runtime/store"
)

// childModeVar makes the test binary act as a rank (or a launcher, or a
// rank's own child) instead of running the tests: Run's tests launch the
// test binary itself.
const childModeVar = "HIR_LAUNCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode, ok := os.LookupEnv(childModeVar); ok {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// child runs one of the test programs and returns its exit status.
func child(mode string) int {
	ctx := context.Background()
	switch mode {
	case "grandchild":
		time.Sleep(time.Hour)
		return 0
	case "launcher":
		// A launcher that the test will kill with SIGKILL.
		err := Run(ctx, LaunchConfig{
			NProc: 2,
			Argv:  []string{os.Args[0]},
			Env:   append(os.Environ(), childModeVar+"=block"),
		})
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	env, ok, err := FromEnv()
	if err != nil || !ok {
		fmt.Fprintln(os.Stderr, "FromEnv:", ok, err)
		return 2
	}
	rv, err := Join(ctx, env, 30*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ready := func() {
		if err := rv.Client.Barrier(ctx, "ready", env.Rank, env.WorldSize, 30*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("ready")
	}

	switch mode {
	case "env":
		for _, name := range []string{EnvRank, EnvWorldSize, EnvLocalRank, EnvLocalWorldSize, EnvMasterAddr, EnvNVLS, EnvLaunched, "TORCHELASTIC_RUN_ID", "GROUP_RANK", "HIR_TEST_KEPT"} {
			v, ok := os.LookupEnv(name)
			if !ok {
				v = "(unset)"
			}
			fmt.Printf("%s=%s\n", name, v)
		}
		fmt.Printf("serve=%v source=%s\n", env.ServeStore, env.Source)
		vals, err := store.ExchangeAll(ctx, rv.Client, "names", env.Rank, env.WorldSize, fmt.Appendf(nil, "r%d", env.Rank), 30*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Printf("exchanged %s\n", vals)
		if err := rv.Close(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Fprint(os.Stderr, "last words without a newline")
		return 0

	case "fail":
		// Rank 1 fails once every rank has started a child of its own and
		// said so; the others would run forever.
		gc := exec.Command(os.Args[0])
		gc.Env = append(os.Environ(), childModeVar+"=grandchild")
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Printf("pid %d grandchild %d\n", os.Getpid(), gc.Process.Pid)
		ready()
		if env.Rank == 1 {
			fmt.Fprintln(os.Stderr, "rank 1 gives up")
			return 3
		}
		time.Sleep(time.Hour)
		return 0

	case "selfkill":
		fmt.Printf("pid %d\n", os.Getpid())
		ready()
		if env.Rank == 1 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		time.Sleep(time.Hour)
		return 0

	case "block", "ignore-term":
		if mode == "ignore-term" {
			signal.Ignore(syscall.SIGTERM)
		}
		fmt.Printf("pid %d\n", os.Getpid())
		ready()
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown test mode", mode)
	return 2
}

// pidsIn collects the numbers after "pid " and "grandchild " in lines.
func pidsIn(lines []string) []int {
	var pids []int
	for _, l := range lines {
		fields := strings.Fields(l)
		for i := 0; i+1 < len(fields); i++ {
			if fields[i] == "pid" || fields[i] == "grandchild" {
				var p int
				if _, err := fmt.Sscan(fields[i+1], &p); err == nil {
					pids = append(pids, p)
				}
			}
		}
	}
	return pids
}
