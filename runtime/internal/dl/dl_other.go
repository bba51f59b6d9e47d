//go:build !linux

package dl

// Open fails: see ErrNeedsLinux.
func Open(string) (uintptr, error) { return 0, ErrNeedsLinux }

// Sym fails: no library is ever open here.
func Sym(uintptr, string) (uintptr, error) { return 0, ErrNeedsLinux }

// Close fails: no library is ever open here.
func Close(uintptr) error { return ErrNeedsLinux }
