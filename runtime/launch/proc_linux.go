package launch

import "syscall"

// sysProcAttr puts each rank in its own process group (so the launcher can
// signal it with everything it started) and has the kernel kill it if the
// launcher dies, so no rank outlives a launcher killed with SIGKILL.
//
// Pdeathsig fires when the thread that started the child exits, not the
// process; Run starts ranks from a goroutine locked to its thread for the
// whole job, so that thread lives as long as the ranks.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
