package ir

import "testing"

func TestRootOnly(t *testing.T) {
	want := map[Opcode]bool{OpReduce: true, OpGather: true}
	for _, op := range Opcodes() {
		if got := op.Info().RootOnly; got != want[op] {
			t.Errorf("%s: RootOnly = %v, want %v", op, got, want[op])
		}
	}
}
