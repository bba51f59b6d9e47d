package host

// fromFortranOrder returns a, whose Data holds its elements in column-major
// (Fortran) order, with them in row-major order: element [i0, i1, ...] is
// at i0 + s0·(i1 + s1·(...)) in the column-major data.
func fromFortranOrder(a *Array) *Array {
	n := a.Len()
	size := int64(a.DType.Size())
	out := &Array{DType: a.DType, Shape: a.Shape, Data: make([]byte, len(a.Data))}
	if n == 0 {
		return out
	}
	rank := len(a.Shape)
	// strides[k] is axis k's step in the column-major data, in elements.
	strides := make([]int64, rank)
	step := int64(1)
	for k := range rank {
		strides[k] = step
		step *= a.Shape[k]
	}
	idx := make([]int64, rank)
	src := int64(0)
	for dst := int64(0); dst < n; dst++ {
		copy(out.Data[dst*size:(dst+1)*size], a.Data[src*size:(src+1)*size])
		// Step the row-major multi-index, the last axis fastest.
		for k := rank - 1; k >= 0; k-- {
			idx[k]++
			src += strides[k]
			if idx[k] < a.Shape[k] {
				break
			}
			src -= idx[k] * strides[k]
			idx[k] = 0
		}
	}
	return out
}
