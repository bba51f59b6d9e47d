package coll

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
)

// orderBefore: when a collective waits for the one issued before it on
// another channel, records that one's event first, or does nothing.
func TestOrderBefore(t *testing.T) {
	capA, capB := new(int), new(int) // two captures
	live := func(doneSet bool, doneIn any) *CommChannel {
		return &CommChannel{stream: &gpu.Stream{}, doneSet: doneSet, doneIn: doneIn}
	}
	ch := live(false, nil)
	for _, c := range []struct {
		name    string
		prev    *CommChannel
		capture any
		want    orderStep
	}{
		{"the first collective", nil, nil, orderNothing},
		{"the same channel: its stream orders it", ch, nil, orderNothing},
		{"another channel whose stream closed", &CommChannel{}, nil, orderNothing},
		{"another channel, its event recorded eagerly", live(true, nil), nil, orderWait},
		{"another channel, no event yet (one stream ran collectives then)", live(false, nil), nil, orderRecordThenWait},
		{"in a capture, recorded in it", live(true, capA), capA, orderWait},
		{"in a capture, recorded before it", live(true, nil), capA, orderNothing},
		{"in a capture, recorded in another", live(true, capB), capA, orderNothing},
		{"in a capture, none recorded", live(false, nil), capA, orderNothing},
		{"eager after a capture's record", live(true, capA), nil, orderRecordThenWait},
	} {
		assert.Equal(t, c.want, orderBefore(c.prev, ch, c.capture), c.name)
	}
}
