//go:build !unix

package fdpass

import (
	"fmt"
	"runtime"
	"time"
)

// Exchange cannot exist here: there are no SCM_RIGHTS on this platform,
// so Listen always fails and the methods below are never reached. They
// keep runtime/cuda compiling everywhere Go does (it refuses to open
// off linux before it would listen).
type Exchange struct{}

// Listen fails: descriptors travel over Unix-domain sockets.
func Listen(rank, world int, token string) (*Exchange, error) {
	return nil, fmt.Errorf("fdpass: passing file descriptors needs Unix-domain sockets, which %s lacks", runtime.GOOS)
}

func (*Exchange) Path() string                          { return "" }
func (*Exchange) Connect([]string, time.Duration) error { return errNoExchange }
func (*Exchange) Send(int, uint64, int) error           { return errNoExchange }
func (*Exchange) Recv(int, uint64, time.Duration, string) (int, error) {
	return -1, errNoExchange
}
func (*Exchange) Pending() int { return 0 }
func (*Exchange) Close() error { return nil }

var errNoExchange = fmt.Errorf("fdpass: no exchange on %s", runtime.GOOS)

// CloseFD does nothing: no descriptor is ever received here.
func CloseFD(int) error { return errNoExchange }
