package benchplot

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// sizeTicks marks every power of two of an axis of log2(bytes) and
// labels some of them in KiB, MiB, GiB: every one when they are few, else
// every k-th down from the largest (the size a reader looks for first),
// so that at most maxSizeLabels fit under a panel.
type sizeTicks struct{}

const maxSizeLabels = 7

func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	first, last := int(math.Ceil(lo)), int(math.Floor(hi))
	if last < first {
		return nil
	}
	step := (last-first)/maxSizeLabels + 1
	var ticks []plot.Tick
	for e := first; e <= last; e++ {
		t := plot.Tick{Value: float64(e)}
		if (last-e)%step == 0 && e >= 0 && e < 63 {
			t.Label = SizeWord(int64(1) << e)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// SizeWord writes a byte count as hirrun bench does: 8KiB, 16MiB, 1GiB,
// or bytes when it is no whole number of those.
func SizeWord(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// latencyTicks marks an axis of log10(µs): labels at 1, 2 and 5 of each
// decade when the axis spans at most three, else at powers of ten only;
// unlabelled marks at the other whole multiples.
type latencyTicks struct{}

func (latencyTicks) Ticks(logLo, logHi float64) []plot.Tick {
	if !(logHi >= logLo) {
		return nil
	}
	lo, hi := math.Pow(10, logLo), math.Pow(10, logHi)
	first, last := int(math.Floor(logLo)), int(math.Ceil(logHi))
	labelled := map[int]bool{1: true, 2: true, 5: true}
	if last-first > 3 {
		labelled = map[int]bool{1: true}
	}
	var ticks []plot.Tick
	for e := first; e <= last; e++ {
		decade := math.Pow10(e)
		for m := 1; m <= 9; m++ {
			v := float64(m) * decade
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: math.Log10(v)}
			if labelled[m] {
				t.Label = strconv.FormatFloat(v, 'f', max(-e, 0), 64) // 0.2, not 0.20000000000000001
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
