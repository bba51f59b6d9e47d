package host

import (
	"fmt"
	"strings"

	"github.com/hirlab/hir/ir"
)

// How NPY headers spell dtypes. NumPy has no 16-bit integer in hir and no
// bfloat16 at all, so every 16-bit raw spelling is read as bf16 bits:
//
//   - '<u2' and '<i2': what x.view(np.uint16) (or torch's
//     t.view(torch.int16).numpy()) saves for a bfloat16 tensor;
//   - '<V2' (and '|V2'): what np.save writes for an ml_dtypes.bfloat16
//     array, whose dtype has no character code of its own
//     (jax-ml/ml_dtypes#41);
//   - 'bfloat16': the dtype's name, as headers written by hand with
//     str(x.dtype) spell it.
//
// '<f4' stands for bf16 too, as a value (rounded to nearest even for an
// input): hir writes bf16 arrays as '<f4'.
var npyDescrs = map[string]ir.DType{
	"<f4": ir.F32, "<f8": ir.F64, "<f2": ir.F16,
	"<i4": ir.I32, "<i8": ir.I64, "|b1": ir.Bool,
	"<u2": ir.BF16, "<i2": ir.BF16, "<V2": ir.BF16, "|V2": ir.BF16, "bfloat16": ir.BF16,
}

// numpyNames are NumPy's names for the descrs read.
var numpyNames = map[string]string{
	"<f4": "float32", "<f8": "float64", "<f2": "float16",
	"<i4": "int32", "<i8": "int64", "|b1": "bool",
	"<u2": "uint16", "<i2": "int16", "<V2": "void16", "|V2": "void16", "bfloat16": "bfloat16",
}

// descrDType is the dtype of a descr, or why it is not read.
func descrDType(descr string) (ir.DType, error) {
	if dt, ok := npyDescrs[descr]; ok {
		return dt, nil
	}
	if strings.HasPrefix(descr, ">") {
		return 0, fmt.Errorf("big-endian data (%s) is not supported: save it little-endian", descr)
	}
	return 0, fmt.Errorf("dtype %s is not supported (supported: <f4 <f8 <f2 <i4 <i8 |b1, and <u2 <i2 <V2 as bf16 bits)", descr)
}

// Stored is an array read from an NPY file, an NPZ member or a
// safetensors file, with the descr its header spelled its dtype with:
// several spellings give one dtype ('<u2' and '<V2' both give bf16); a
// safetensors tensor's is the header's dtype ("BF16").
type Stored struct {
	Array *Array
	Descr string
}

// DTypeText says what the file holds, NumPy's way: float32 ('<f4'), or
// uint16 ('<u2', read as bf16 bits).
func (s Stored) DTypeText() string {
	// A safetensors tensor's Descr is the header's dtype: "F64 (f64)".
	if st, ok := safetensorsDTypes[s.Descr]; ok && st.dt != ir.InvalidDType {
		return fmt.Sprintf("%s (%s)", s.Descr, st.dt)
	}
	name := numpyNames[s.Descr]
	if name == "" {
		name = s.Array.DType.String()
	}
	if s.Array.DType == ir.BF16 && s.Descr != "bfloat16" {
		return fmt.Sprintf("%s ('%s', read as bf16 bits)", name, s.Descr)
	}
	return fmt.Sprintf("%s ('%s')", name, s.Descr)
}
