package gpu

import (
	"testing"
	"unsafe"
)

// TestLaunchConfigLayout: launchConfig begins with cuda.h's CUlaunchConfig
// (x86-64) and its attribute is a CUlaunchAttribute, as cuLaunchKernelEx
// reads them.
func TestLaunchConfigLayout(t *testing.T) {
	var c launchConfig
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"sharedMemBytes", unsafe.Offsetof(c.shared), 24},
		{"hStream", unsafe.Offsetof(c.stream), 32},
		{"attrs", unsafe.Offsetof(c.attrs), 40},
		{"numAttrs", unsafe.Offsetof(c.numAttrs), 48},
		{"CUlaunchAttribute.value", unsafe.Offsetof(c.attr.value), 8},
		{"sizeof(CUlaunchAttribute)", unsafe.Sizeof(c.attr), 72},
	} {
		if f.got != f.want {
			t.Errorf("%s at %d, want %d", f.name, f.got, f.want)
		}
	}
	p := launchConfigs.Get().(*launchConfig)
	defer launchConfigs.Put(p)
	if p.attrs != &p.attr || p.numAttrs != 1 || p.attr.id != launchAttrProgrammaticStreamSerialization || p.attr.value[0] != 1 {
		t.Errorf("a pooled config does not ask for programmatic stream serialization: %+v", p)
	}
}
