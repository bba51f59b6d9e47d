//go:build !unix

package main

import "os"

// processAlive: on windows os.FindProcess opens the process, which fails
// once it has exited and been reaped.
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
