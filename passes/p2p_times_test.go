package passes

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTimesReadsAsASentence: the send/recv messages count as a sentence
// would, never "1 time(s)".
func TestTimesReadsAsASentence(t *testing.T) {
	for n, want := range map[int]string{
		1: "once", 2: "twice", 3: "three times", 9: "nine times", 10: "10 times", 1 << 20: "1048576 times",
	} {
		assert.Equal(t, want, times(n), "times(%d)", n)
	}
}
