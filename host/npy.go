package host

// NPY files (NumPy's .npy format): a magic string, a version, a header that
// is a Python dict literal {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), } padded with spaces to a multiple of 64 bytes and ended
// by a newline, then the raw elements. Versions 1.0 (16-bit header length)
// and 2.0/3.0 (32-bit) are read; 1.0 is written. Only little-endian
// arrays of the dtypes hir has are supported; Fortran-ordered ones are
// read into row-major order (fortran.go). NumPy has no bfloat16: a bf16
// array is written as <f4 (exact), and 16-bit raw data (<u2, <i2, or the
// <V2 that ml_dtypes' bfloat16 saves as) is read as bf16 bits (npydescr.go).

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/hirlab/hir/ir"
)

const npyMagic = "\x93NUMPY"

// maxHeaderLen bounds the header a reader accepts; real headers are a few
// dozen bytes and a corrupt length must not make us allocate gigabytes.
const maxHeaderLen = 1 << 20

// maxNPYBytes bounds the data size a header may claim (1 TiB).
const maxNPYBytes = 1 << 40

// npyDescr is the descr written for each dtype.
func npyDescr(dt ir.DType) string {
	switch dt {
	case ir.F32, ir.BF16:
		return "<f4"
	case ir.F64:
		return "<f8"
	case ir.F16:
		return "<f2"
	case ir.I32:
		return "<i4"
	case ir.I64:
		return "<i8"
	case ir.Bool:
		return "|b1"
	}
	return ""
}

// ReadNPY reads one array from r, consuming exactly its bytes (several
// arrays saved back to back can be read in turn).
func ReadNPY(r io.Reader) (*Array, error) {
	s, err := ReadStoredNPY(r)
	return s.Array, err
}

// ReadStoredNPY is ReadNPY that also says how the header spelled the dtype.
func ReadStoredNPY(r io.Reader) (Stored, error) {
	a, descr, err := readNPY(r)
	if err != nil {
		return Stored{}, err
	}
	return Stored{Array: a, Descr: descr}, nil
}

func readNPY(r io.Reader) (*Array, string, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, "", fmt.Errorf("not an NPY file: %v", shortRead(err))
	}
	if string(pre[:6]) != npyMagic {
		return nil, "", errors.New("not an NPY file (it does not start with \\x93NUMPY)")
	}
	major, minor := pre[6], pre[7]
	var headerLen uint32
	switch major {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, "", fmt.Errorf("NPY header: %v", shortRead(err))
		}
		headerLen = uint32(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, "", fmt.Errorf("NPY header: %v", shortRead(err))
		}
		headerLen = binary.LittleEndian.Uint32(b[:])
	default:
		return nil, "", fmt.Errorf("NPY format version %d.%d is not supported (1.0, 2.0 and 3.0 are)", major, minor)
	}
	if headerLen > maxHeaderLen {
		return nil, "", fmt.Errorf("NPY header length %d is implausibly large (the file is corrupt?)", headerLen)
	}
	header := make([]byte, headerLen)
	if _, err := io.ReadFull(r, header); err != nil {
		return nil, "", fmt.Errorf("NPY header: %v", shortRead(err))
	}
	h, err := parseNPYHeader(string(header))
	if err != nil {
		return nil, "", fmt.Errorf("NPY header %s: %v", strings.TrimSpace(string(header)), err)
	}
	dt, shape := h.dtype, h.shape
	n := int64(dt.Size())
	for _, e := range shape {
		if e != 0 && n > maxNPYBytes/e {
			return nil, "", fmt.Errorf("NPY shape %v is too large", shape)
		}
		n *= e
	}
	// Read through a limit so a truncated file fails without first
	// allocating what its header claims.
	var buf bytes.Buffer
	buf.Grow(int(min(n, 64<<20)))
	got, err := io.Copy(&buf, io.LimitReader(r, n))
	if err != nil {
		return nil, "", fmt.Errorf("NPY data: %v", err)
	}
	if got != n {
		return nil, "", fmt.Errorf("NPY data is truncated: %v of %s needs %d bytes, the file has %d", shape, h.descr, n, got)
	}
	a := &Array{DType: dt, Shape: shape, Data: buf.Bytes()}
	if h.fortran {
		a = fromFortranOrder(a)
	}
	if dt == ir.Bool {
		for i, b := range a.Data {
			if b > 1 {
				a.Data[i] = 1
			}
		}
	}
	return a, h.descr, nil
}

func shortRead(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the file ends too early")
	}
	return err
}

// npyHeader is what an NPY header says.
type npyHeader struct {
	descr   string
	dtype   ir.DType
	shape   []int64
	fortran bool // column-major data; false where the orders agree
}

// parseNPYHeader reads the header dict.
func parseNPYHeader(h string) (npyHeader, error) {
	p := &pyParser{s: h}
	v, err := p.value()
	if err == nil {
		p.space()
		if p.i < len(p.s) {
			err = fmt.Errorf("unexpected %q after the dict", p.s[p.i:])
		}
	}
	if err != nil {
		return npyHeader{}, err
	}
	dict, ok := v.(map[string]any)
	if !ok {
		return npyHeader{}, errors.New("the header is not a dict")
	}
	descrV, ok := dict["descr"]
	if !ok {
		return npyHeader{}, errors.New("no 'descr' key")
	}
	descr, ok := descrV.(string)
	if !ok {
		return npyHeader{}, errors.New("structured dtypes are not supported")
	}
	dt, err := descrDType(descr)
	if err != nil {
		return npyHeader{}, err
	}
	shapeV, ok := dict["shape"]
	if !ok {
		return npyHeader{}, errors.New("no 'shape' key")
	}
	tuple, ok := shapeV.([]any)
	if !ok {
		return npyHeader{}, errors.New("'shape' is not a tuple")
	}
	shape := make([]int64, len(tuple))
	nonUnit := 0
	for i, e := range tuple {
		n, ok := e.(int64)
		if !ok || n < 0 {
			return npyHeader{}, fmt.Errorf("'shape' holds %v, which is not an extent", e)
		}
		shape[i] = n
		if n > 1 {
			nonUnit++
		}
	}
	fortranV, ok := dict["fortran_order"]
	if !ok {
		return npyHeader{}, errors.New("no 'fortran_order' key")
	}
	fortran, ok := fortranV.(bool)
	if !ok {
		return npyHeader{}, errors.New("'fortran_order' is not True or False")
	}
	// With at most one axis longer than 1 both orders lay elements out alike.
	return npyHeader{descr: descr, dtype: dt, shape: shape, fortran: fortran && nonUnit > 1}, nil
}

// pyParser reads the subset of Python literals NPY headers use: dicts,
// tuples, strings, True/False and integers.
type pyParser struct {
	s string
	i int
}

func (p *pyParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyParser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *pyParser) expect(c byte) error {
	if p.peek() != c {
		return p.unexpected(fmt.Sprintf("%q", c))
	}
	p.i++
	return nil
}

func (p *pyParser) unexpected(want string) error {
	if p.i >= len(p.s) {
		return fmt.Errorf("want %s, the header ends", want)
	}
	return fmt.Errorf("want %s at byte %d, got %q", want, p.i, p.s[p.i])
}

func (p *pyParser) value() (any, error) {
	switch c := p.peek(); {
	case c == '{':
		return p.dict()
	case c == '(' || c == '[':
		return p.tuple()
	case c == '\'' || c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.integer()
	case c >= 'A' && c <= 'Z':
		start := p.i
		for p.i < len(p.s) && isLetter(p.s[p.i]) {
			p.i++
		}
		switch w := p.s[start:p.i]; w {
		case "True":
			return true, nil
		case "False":
			return false, nil
		default:
			return nil, fmt.Errorf("unexpected word %s", w)
		}
	}
	return nil, p.unexpected("a value")
}

func isLetter(c byte) bool { return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }

func (p *pyParser) dict() (any, error) {
	p.i++ // {
	d := map[string]any{}
	for p.peek() != '}' {
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		d[k.(string)] = v
		if p.peek() != ',' {
			break
		}
		p.i++
	}
	return d, p.expect('}')
}

func (p *pyParser) tuple() (any, error) {
	closing := byte(')')
	if p.s[p.i] == '[' {
		closing = ']'
	}
	p.i++
	var t []any
	for p.peek() != closing {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		t = append(t, v)
		if p.peek() != ',' {
			break
		}
		p.i++
	}
	if t == nil {
		t = []any{}
	}
	return t, p.expect(closing)
}

func (p *pyParser) str() (any, error) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return nil, p.unexpected("a string")
	}
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return nil, errors.New("unterminated string")
	}
	s := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return s, nil
}

func (p *pyParser) integer() (any, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	n, err := strconv.ParseInt(p.s[start:p.i], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("bad integer %q", p.s[start:p.i])
	}
	// Python 2 wrote long integers with an L suffix.
	if p.i < len(p.s) && p.s[p.i] == 'L' {
		p.i++
	}
	return n, nil
}

// WriteNPY writes a as an NPY 1.0 file (2.0 only if the header would not
// fit 1.0's 16-bit length). bf16 is written as <f4, exactly.
func (a *Array) WriteNPY(w io.Writer) error {
	descr := npyDescr(a.DType)
	if descr == "" {
		return fmt.Errorf("write NPY: invalid dtype %v", a.DType)
	}
	dims := make([]string, len(a.Shape))
	for i, e := range a.Shape {
		dims[i] = strconv.FormatInt(e, 10)
	}
	shape := "(" + strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += "," // a one-element Python tuple
	}
	shape += ")"
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)

	// Pad with spaces so the data starts at a multiple of 64 bytes.
	version, lenBytes := byte(1), 2
	if len(dict)+1+10 > 0xffff {
		version, lenBytes = 2, 4
	}
	prefix := len(npyMagic) + 2 + lenBytes
	total := (prefix + len(dict) + 1 + 63) / 64 * 64
	header := dict + strings.Repeat(" ", total-prefix-len(dict)-1) + "\n"

	var b bytes.Buffer
	b.WriteString(npyMagic)
	b.WriteByte(version)
	b.WriteByte(0)
	if version == 1 {
		_ = binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	} else {
		_ = binary.Write(&b, binary.LittleEndian, uint32(len(header)))
	}
	b.WriteString(header)
	if _, err := w.Write(b.Bytes()); err != nil {
		return err
	}
	data := a.Data
	if a.DType == ir.BF16 {
		data = a.Convert(ir.F32).Data
	}
	_, err := w.Write(data)
	return err
}

// ReadNPYFile reads the NPY file at path; errors name the file.
func ReadNPYFile(path string) (*Array, error) {
	s, err := ReadStoredNPYFile(path)
	return s.Array, err
}

// ReadStoredNPYFile is ReadNPYFile that also says how the header spelled
// the dtype.
func ReadStoredNPYFile(path string) (Stored, error) {
	f, err := os.Open(path)
	if err != nil {
		return Stored{}, err
	}
	defer f.Close()
	s, err := ReadStoredNPY(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return Stored{}, fmt.Errorf("%s: %v", path, err)
	}
	return s, nil
}

// WriteNPYFile writes a to path as an NPY file.
func (a *Array) WriteNPYFile(path string) error {
	var b bytes.Buffer
	if err := a.WriteNPY(&b); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
