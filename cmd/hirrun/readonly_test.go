package main

import (
	"os"
	goruntime "runtime"
)

// noReadOnlyDirs says why a directory made read-only (0o555) would not
// stop this test writing in it, or "" when it would: root writes
// anywhere, and windows keeps no write permission on directories.
func noReadOnlyDirs() string {
	switch {
	case goruntime.GOOS == "windows":
		return "windows has no read-only directories"
	case os.Geteuid() == 0:
		return "root writes anywhere"
	}
	return ""
}
