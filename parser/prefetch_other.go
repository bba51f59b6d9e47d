//go:build !amd64

package parser

// prefetch does nothing where no instruction for it is written.
func prefetch(p *nameSlot) {}
