package parser

// prefetch asks the processor to bring *p into its caches, without waiting
// for it (nameTable.touch).
//
//go:noescape
func prefetch(p *nameSlot)
