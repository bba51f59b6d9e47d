//go:build unix

package launch

import (
	"os"
	"syscall"
)

// terminate asks a rank and everything in its process group to stop.
func terminate(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGTERM) }

// kill stops a rank's process group for good. Errors are ignored: the group
// may already be empty.
func kill(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGKILL) }
