//go:build unix

package main

import (
	"errors"
	"syscall"
)

// processAlive: signal 0 checks that pid exists without touching it.
func processAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
