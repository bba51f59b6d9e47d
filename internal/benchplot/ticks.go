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

// latencyTicks marks an axis of log10(µs) at the whole multiples of each
// decade and labels them: every one when the axis spans at most a decade,
// 1, 2 and 5 up to three, powers of ten alone beyond.
type latencyTicks struct{}

func (latencyTicks) Ticks(logLo, logHi float64) []plot.Tick {
	if !(logHi >= logLo) {
		return nil
	}
	lo, hi := math.Pow(10, logLo), math.Pow(10, logHi)
	first, last := int(math.Floor(logLo)), int(math.Ceil(logHi))
	labelled := func(m int) bool { return true }
	switch span := logHi - logLo; {
	case span > 3:
		labelled = func(m int) bool { return m == 1 }
	case span > 1:
		labelled = func(m int) bool { return m == 1 || m == 2 || m == 5 }
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
			if labelled(m) {
				t.Label = strconv.FormatFloat(v, 'f', max(-e, 0), 64) // 0.2, not 0.20000000000000001
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// bandwidthTicks labels a linear axis at a round step (1, 2 or 5 times a
// power of ten) that gives 4 to 7 labels; gonum's own ticks can leave two
// ("0.00", "25.00") on a small range.
type bandwidthTicks struct{}

func (bandwidthTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return nil
	}
	raw := (hi - lo) / 6
	e := int(math.Floor(math.Log10(raw)))
	step := math.Pow10(e)
	for _, m := range []float64{1, 2, 5, 10} {
		if m*math.Pow10(e) >= raw {
			step = m * math.Pow10(e)
			break
		}
	}
	var ticks []plot.Tick
	for i := math.Ceil(lo / step); i*step <= hi; i++ {
		v := i * step
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', max(-e, 0), 64)})
	}
	return ticks
}
