//go:build unix && !linux

package fdpass

import (
	"errors"
	"net"
	"runtime"
)

// peerUID: the standard library reads peer credentials (SO_PEERCRED) on
// Linux only. Elsewhere no peer can be checked, so every connection is
// refused: descriptors are never taken from an unverified process.
func peerUID(*net.UnixConn) (int, error) {
	return -1, errors.New("fdpass: peer credentials are not supported on " + runtime.GOOS)
}
