//go:build unix && !linux

package launch

import "syscall"

// sysProcAttr puts each rank in its own process group. There is no
// parent-death signal here: ranks of a launcher killed with SIGKILL live on.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
