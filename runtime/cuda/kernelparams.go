package cuda

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/codegen"
)

// kernelParams is a generated kernel's parameter block, laid out once when
// the kernel is loaded and rewritten in place at each launch:
// cuLaunchKernel copies the parameters before it returns, so one block per
// kernel serves every launch and a launch allocates nothing. mu keeps
// concurrent launches of one kernel from writing the block at once.
type kernelParams struct {
	mu    sync.Mutex
	buf   []byte           // the C ABI layout of every parameter, literals filled in
	ptrs  []unsafe.Pointer // kernelParams: one pointer into buf per parameter, then nil
	slots []paramSlot      // the parameters a launch fills
	grid  [3]uint32
	block [3]uint32
}

// paramSlot is where launch argument arg's word goes: size bytes at off.
type paramSlot struct{ off, size, arg int }

func newKernelParams(gen *codegen.Kernel, numSMs int) (*kernelParams, error) {
	buf, offsets, err := gen.PackArgs(make([]uint64, gen.NumInputs+gen.NumOutputs))
	if err != nil {
		return nil, err
	}
	if len(buf) == 0 {
		buf = make([]byte, 1) // &buf[0] must exist
	}
	kp := &kernelParams{buf: buf, ptrs: make([]unsafe.Pointer, len(offsets)+1)}
	for i, off := range offsets {
		kp.ptrs[i] = unsafe.Pointer(&buf[off])
		if p := gen.Params[i]; p.Kind != codegen.ParamLiteral {
			kp.slots = append(kp.slots, paramSlot{off: off, size: p.Size, arg: p.Arg})
		}
	}
	kp.grid, kp.block = gen.Launch(numSMs)
	return kp, nil
}

// fill writes each launch argument's word (an address, or a scalar's
// bits) into its slot; the caller holds mu.
func (kp *kernelParams) fill(la []launchArg) {
	var word [8]byte
	for _, s := range kp.slots {
		binary.LittleEndian.PutUint64(word[:], la[s.arg].addr)
		copy(kp.buf[s.off:s.off+s.size], word[:s.size])
	}
}
