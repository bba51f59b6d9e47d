package host

import (
	"math"
	"strconv"
	"strings"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
)

// SummaryLimit is the largest element count Summary prints in full.
const SummaryLimit = 32

// summaryHead is how many leading values a large array's summary shows.
const summaryHead = 8

// Summary describes the array in one line. Arrays of at most SummaryLimit
// elements print in full with nested brackets:
//
//	f32[2, 3] = [[1, 2, 3], [4, 5, 6]]
//
// larger ones print their first values (flat, row-major) and statistics:
//
//	f32[64, 64] = [0.5, -0.25, ...] min=-0.99 max=0.98 mean=0.0012 sum=4.9
//
// NaNs are counted (nan=K) and left out of the statistics. Floats print in
// the shortest form that reads back as the same value of their dtype.
func (a *Array) Summary() string {
	var b strings.Builder
	b.WriteString(a.TypeString())
	b.WriteString(" = ")
	n := a.Len()
	if n <= SummaryLimit {
		var i int64
		a.nested(&b, 0, &i)
		return b.String()
	}
	b.WriteByte('[')
	for i := int64(0); i < summaryHead; i++ {
		b.WriteString(a.format(i))
		b.WriteString(", ")
	}
	b.WriteString("...]")
	a.stats(&b)
	return b.String()
}

// nested writes the sub-array of axis `axis` starting at element *i.
func (a *Array) nested(b *strings.Builder, axis int, i *int64) {
	if axis == len(a.Shape) {
		b.WriteString(a.format(*i))
		*i++
		return
	}
	b.WriteByte('[')
	for k := int64(0); k < a.Shape[axis]; k++ {
		if k > 0 {
			b.WriteString(", ")
		}
		a.nested(b, axis+1, i)
	}
	b.WriteByte(']')
}

func (a *Array) stats(b *strings.Builder) {
	n := a.Len()
	if !a.DType.IsFloat() {
		lo, hi, sum := a.AtInt(0), a.AtInt(0), int64(0)
		for i := int64(0); i < n; i++ {
			v := a.AtInt(i)
			lo, hi, sum = min(lo, v), max(hi, v), sum+v
		}
		b.WriteString(" min=" + a.formatValue(float64(lo)))
		b.WriteString(" max=" + a.formatValue(float64(hi)))
		b.WriteString(" mean=" + strconv.FormatFloat(float64(sum)/float64(n), 'g', 6, 64))
		b.WriteString(" sum=" + strconv.FormatInt(sum, 10))
		return
	}
	lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
	var nans, counted int64
	for i := int64(0); i < n; i++ {
		v := a.At(i)
		if v != v {
			nans++
			continue
		}
		lo, hi, sum = math.Min(lo, v), math.Max(hi, v), sum+v
		counted++
	}
	if counted > 0 {
		b.WriteString(" min=" + a.formatValue(lo))
		b.WriteString(" max=" + a.formatValue(hi))
		b.WriteString(" mean=" + formatStat(sum/float64(counted)))
		b.WriteString(" sum=" + formatStat(sum))
	}
	if nans > 0 {
		b.WriteString(" nan=" + strconv.FormatInt(nans, 10))
	}
}

func formatStat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// format spells element i.
func (a *Array) format(i int64) string {
	if !a.DType.IsFloat() {
		if a.DType == ir.Bool {
			return strconv.FormatBool(a.AtInt(i) != 0)
		}
		return strconv.FormatInt(a.AtInt(i), 10)
	}
	return a.formatValue(a.At(i))
}

// formatValue spells v, a value of the array's dtype, in the shortest form
// that reads back as the same value of that dtype.
func (a *Array) formatValue(v float64) string {
	switch {
	case a.DType == ir.Bool:
		return strconv.FormatBool(v != 0)
	case !a.DType.IsFloat():
		return strconv.FormatFloat(v, 'f', -1, 64)
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case a.DType == ir.F64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case a.DType == ir.F32:
		return strconv.FormatFloat(v, 'g', -1, 32)
	}
	// f16 and bf16: the fewest digits that round back to v.
	for prec := 1; prec < 17; prec++ {
		s := strconv.FormatFloat(v, 'g', prec, 64)
		if w, err := strconv.ParseFloat(s, 64); err == nil && numeric.RoundTo(a.DType, w) == v {
			// Respell the short decimal plainly: 100, not 1e+02.
			return strconv.FormatFloat(w, 'g', -1, 64)
		}
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
