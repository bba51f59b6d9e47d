package ir

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRootOnly(t *testing.T) {
	want := map[Opcode]bool{OpReduce: true, OpGather: true}
	for _, op := range Opcodes() {
		assert.Equal(t, want[op], op.Info().RootOnly, "%s: RootOnly", op)
	}
}
