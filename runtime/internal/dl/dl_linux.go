package dl

import "github.com/ebitengine/purego"

// Open loads the library at path (a file or a soname), binding every
// symbol now and making them visible to libraries loaded later.
func Open(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// Sym is the address of symbol name in the library handle opened.
func Sym(handle uintptr, name string) (uintptr, error) {
	return purego.Dlsym(handle, name)
}

// Close unloads a library Open loaded.
func Close(handle uintptr) error { return purego.Dlclose(handle) }
