//go:build !unix

package launch

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// Without process groups and SIGTERM, stopping a rank is killing it.
func terminate(p *os.Process) { p.Kill() }
func kill(p *os.Process)      { p.Kill() }
