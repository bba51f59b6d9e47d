package host

// safetensors files (Hugging Face's format; what safetensors.torch.save_file
// writes): an 8-byte little-endian header length N, N bytes of JSON header
//
//	{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},...}
//
// (padded with spaces to a multiple of 8 bytes by the library), then the
// data: each tensor's row-major, little-endian elements at [begin, end) of
// the bytes after the header. The reader checks what the reference
// implementation (huggingface/safetensors, safetensors/src/tensor.rs)
// checks, with messages that name the file and the tensor: a header length
// within the format's 100,000,000 bytes and the file, UTF-8 JSON, the
// known dtypes, offsets that hold exactly shape × dtype bytes and tile the
// data with no gap, overlap or byte left over. It never allocates more
// than the file holds: the header and each tensor are read from the file,
// bounded by its size. The writer writes the bytes the library writes for
// the same tensors (WriteSafeTensors says how).

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hirlab/hir/ir"
)

// safetensorsMaxHeader is the largest header length read (and written):
// the reference implementation's MAX_HEADER_SIZE.
const safetensorsMaxHeader = 100_000_000

// safetensorsMetadataKey is the header's entry that holds the free-form
// string-to-string metadata, not a tensor.
const safetensorsMetadataKey = "__metadata__"

// stDType is one dtype the format names: its bits per element, its place
// in the library's Dtype enum (the order the writer sorts by), and hir's
// dtype where hir has it.
type stDType struct {
	bits int
	rank int
	dt   ir.DType // ir.InvalidDType: not one of hir's
}

// safetensorsDTypes are the format's dtypes, in the library's enum order.
var safetensorsDTypes = func() map[string]stDType {
	m := map[string]stDType{}
	for i, d := range []struct {
		name string
		bits int
		dt   ir.DType
	}{
		{"BOOL", 8, ir.Bool}, {"F4", 4, 0}, {"F6_E2M3", 6, 0}, {"F6_E3M2", 6, 0},
		{"U8", 8, 0}, {"I8", 8, 0}, {"F8_E5M2", 8, 0}, {"F8_E4M3", 8, 0}, {"F8_E8M0", 8, 0},
		{"F8_E4M3FNUZ", 8, 0}, {"F8_E5M2FNUZ", 8, 0}, {"I16", 16, 0}, {"U16", 16, 0},
		{"F16", 16, ir.F16}, {"BF16", 16, ir.BF16}, {"I32", 32, ir.I32}, {"U32", 32, 0},
		{"F32", 32, ir.F32}, {"C64", 64, 0}, {"F64", 64, ir.F64}, {"I64", 64, ir.I64}, {"U64", 64, 0},
	} {
		m[d.name] = stDType{bits: d.bits, rank: i, dt: d.dt}
	}
	return m
}()

// safetensorsDTypeOf is the format's name of hir's dtype dt.
func safetensorsDTypeOf(dt ir.DType) (string, stDType, bool) {
	for name, d := range safetensorsDTypes {
		if d.dt == dt && dt != ir.InvalidDType {
			return name, d, true
		}
	}
	return "", stDType{}, false
}

// safetensorsSupported lists the dtypes hir reads, for messages.
const safetensorsSupported = "BF16 F16 F32 F64 I32 I64 BOOL"

// SafeTensors is an open safetensors file: its header is read and checked
// at once, each tensor is read when asked for.
type SafeTensors struct {
	path     string // for messages
	r        io.ReaderAt
	dataAt   int64 // where the data starts in the file: 8 + the header's length
	names    []string
	tensors  map[string]safetensor
	metadata map[string]string
	closer   io.Closer // nil for a file in memory
}

// safetensor is one tensor's header entry.
type safetensor struct {
	dtype      string // as the header spells it
	shape      []int64
	begin, end int64 // in the data
}

// OpenSafeTensors opens the safetensors file at path and checks its
// header; errors name the file. A missing file's error is the os.Open
// error (errors.Is(err, fs.ErrNotExist) holds).
func OpenSafeTensors(path string) (*SafeTensors, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	s, err := ReadSafeTensors(f, fi.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.closer = f
	return s, nil
}

// ReadSafeTensors reads the header of the safetensors file of size bytes
// that r holds; name is what errors call it. Tensors are read from r when
// asked for.
func ReadSafeTensors(r io.ReaderAt, size int64, name string) (*SafeTensors, error) {
	s, err := readSafeTensorsHeader(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	s.path = name
	return s, nil
}

func readSafeTensorsHeader(r io.ReaderAt, size int64) (*SafeTensors, error) {
	if size < 8 {
		return nil, fmt.Errorf("not a safetensors file: it has %d bytes, fewer than the 8 that give its header's length", size)
	}
	var pre [8]byte
	if err := readFullAt(r, pre[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors header length: %v", err)
	}
	n := binary.LittleEndian.Uint64(pre[:])
	if n > safetensorsMaxHeader {
		return nil, fmt.Errorf("not a safetensors file, or a corrupt one: its header length is %d bytes, past the format's limit of %d", n, safetensorsMaxHeader)
	}
	if int64(n) > size-8 {
		return nil, fmt.Errorf("truncated: the safetensors header is %d bytes long, but the file has only %d bytes after the length", n, size-8)
	}
	header := make([]byte, n)
	if err := readFullAt(r, header, 8); err != nil {
		return nil, fmt.Errorf("safetensors header: %v", err)
	}
	s := &SafeTensors{r: r, dataAt: 8 + int64(n), tensors: map[string]safetensor{}}
	if err := s.parseHeader(header); err != nil {
		return nil, fmt.Errorf("safetensors header: %v", err)
	}
	if err := s.checkOffsets(size - s.dataAt); err != nil {
		return nil, err
	}
	return s, nil
}

// readFullAt reads len(p) bytes at off, saying "the file ends too early"
// when it does.
func readFullAt(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return errors.New("the file ends too early")
	}
	return err
}

// parseHeader reads the header's JSON object: the metadata and each
// tensor's entry, a name given twice being an error.
func (s *SafeTensors) parseHeader(header []byte) error {
	if !utf8.Valid(header) {
		return errors.New("it is not UTF-8 text")
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %v", jsonError(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not JSON: %v", jsonError(err))
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("not JSON: a key is %v", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("not JSON: at %q: %v", key, jsonError(err))
		}
		if seen[key] {
			return fmt.Errorf("it names %q twice", key)
		}
		seen[key] = true
		if key == safetensorsMetadataKey {
			if err := json.Unmarshal(raw, &s.metadata); err != nil {
				return fmt.Errorf("%s: want an object of strings: %v", safetensorsMetadataKey, jsonError(err))
			}
			continue
		}
		t, err := parseTensorEntry(raw)
		if err != nil {
			return fmt.Errorf("tensor %q: %v", key, err)
		}
		s.tensors[key] = t
		s.names = append(s.names, key)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return fmt.Errorf("not JSON: %v", jsonError(err))
	}
	// What follows the object may only be the padding: JSON whitespace.
	rest := header[dec.InputOffset():]
	if i := bytes.IndexFunc(rest, func(r rune) bool { return !strings.ContainsRune(" \t\r\n", r) }); i >= 0 {
		return fmt.Errorf("%q follows the JSON object (only spaces may pad it)", clip(bytes.TrimRight(rest[i:], " \t\r\n")))
	}
	slices.Sort(s.names) // as Python's safe_open(...).keys() lists them
	return nil
}

// jsonError is err without encoding/json's Go type names where it has a
// plainer text.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("a JSON %s where it wants %s", te.Value, jsonKind(te.Type.Kind().String()))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the header ends inside the JSON")
	}
	return err
}

func jsonKind(k string) string {
	switch k {
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	}
	return "a " + k
}

// clip shortens a hostile header's text for a message.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// parseTensorEntry reads {"dtype": "F32", "shape": [2, 3], "data_offsets":
// [0, 24]}: the keys are matched exactly (JSON is case-sensitive), others
// are ignored, as the reference implementation does.
func parseTensorEntry(raw json.RawMessage) (safetensor, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return safetensor{}, fmt.Errorf("want an object with dtype, shape and data_offsets: %v", jsonError(err))
	}
	var t safetensor
	for _, key := range []string{"dtype", "shape", "data_offsets"} {
		if _, ok := fields[key]; !ok {
			return safetensor{}, fmt.Errorf("no %q", key)
		}
	}
	if err := json.Unmarshal(fields["dtype"], &t.dtype); err != nil {
		return safetensor{}, fmt.Errorf("dtype: want a string, got %s", clip(fields["dtype"]))
	}
	st, ok := safetensorsDTypes[t.dtype]
	if !ok {
		return safetensor{}, fmt.Errorf("dtype %q is not a safetensors dtype", t.dtype)
	}
	shape, err := naturals(fields["shape"])
	if err != nil {
		return safetensor{}, fmt.Errorf("shape: %v", err)
	}
	t.shape = shape
	offsets, err := naturals(fields["data_offsets"])
	if err != nil {
		return safetensor{}, fmt.Errorf("data_offsets: %v", err)
	}
	if len(offsets) != 2 {
		return safetensor{}, fmt.Errorf("data_offsets: want [begin, end], got %d numbers", len(offsets))
	}
	t.begin, t.end = offsets[0], offsets[1]
	if t.end < t.begin {
		return safetensor{}, fmt.Errorf("data_offsets [%d, %d] end before they begin", t.begin, t.end)
	}
	elems, ok := ir.ProductChecked(t.shape)
	bits, ok2 := ir.MulChecked(elems, int64(st.bits))
	if !ok || !ok2 {
		return safetensor{}, fmt.Errorf("shape %v of %s is too large", t.shape, t.dtype)
	}
	if bits%8 != 0 {
		return safetensor{}, fmt.Errorf("%d elements of %s do not fill whole bytes", elems, t.dtype)
	}
	if want := bits / 8; t.end-t.begin != want {
		return safetensor{}, fmt.Errorf("data_offsets [%d, %d] hold %d bytes, but %s%v needs %d", t.begin, t.end, t.end-t.begin, t.dtype, t.shape, want)
	}
	return t, nil
}

// naturals reads a JSON array of integers >= 0 that fit an int64, written
// as integers (no sign, fraction, exponent or quotes).
func naturals(raw json.RawMessage) ([]int64, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, fmt.Errorf("want an array of integers, got %s", clip(raw))
	}
	out := make([]int64, len(items))
	for i, it := range items {
		v, err := strconv.ParseUint(string(it), 10, 64)
		if err != nil || v > math.MaxInt64 {
			return nil, fmt.Errorf("%s is not an integer >= 0 that fits 64 bits", clip(it))
		}
		out[i] = int64(v)
	}
	return out, nil
}

// checkOffsets checks that the tensors' data tile the dataLen bytes after
// the header: each within them, in offset order with no gap and no
// overlap, and nothing after the last.
func (s *SafeTensors) checkOffsets(dataLen int64) error {
	order := slices.Clone(s.names)
	slices.SortStableFunc(order, func(a, b string) int {
		ta, tb := s.tensors[a], s.tensors[b]
		if ta.begin != tb.begin {
			return cmpInt(ta.begin, tb.begin)
		}
		return cmpInt(ta.end, tb.end)
	})
	// Past the end first: a truncated file is the likeliest fault.
	for _, name := range order {
		if t := s.tensors[name]; t.end > dataLen {
			return fmt.Errorf("truncated: tensor %q's data_offsets [%d, %d] run past the end of the data, which is %d bytes long", name, t.begin, t.end, dataLen)
		}
	}
	var pos int64
	prev := ""
	for _, name := range order {
		t := s.tensors[name]
		switch {
		case t.begin < pos:
			p := s.tensors[prev]
			return fmt.Errorf("tensors %q (data_offsets [%d, %d]) and %q ([%d, %d]) overlap", prev, p.begin, p.end, name, t.begin, t.end)
		case t.begin > pos:
			return fmt.Errorf("bytes [%d, %d) of the data belong to no tensor (the next is %q at [%d, %d])", pos, t.begin, name, t.begin, t.end)
		}
		pos, prev = t.end, name
	}
	if pos != dataLen {
		return fmt.Errorf("%d bytes follow the last tensor's data (the tensors' data_offsets end at %d, the data is %d bytes long)", dataLen-pos, pos, dataLen)
	}
	return nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Names are the tensors' names, sorted (as Python's safe_open lists them).
func (s *SafeTensors) Names() []string { return s.names }

// Metadata is the header's __metadata__: nil where it has none.
func (s *SafeTensors) Metadata() map[string]string { return s.metadata }

// Read reads the tensor called name. Its Stored.Descr is the header's
// dtype ("BF16"); BF16 data is hir's bf16 bits as they are.
func (s *SafeTensors) Read(name string) (Stored, error) {
	t, ok := s.tensors[name]
	if !ok {
		return Stored{}, fmt.Errorf("%s: no tensor named %q (it holds %s)", s.path, name, namesText(s.names))
	}
	dt := safetensorsDTypes[t.dtype].dt
	if dt == ir.InvalidDType {
		return Stored{}, fmt.Errorf("%s: tensor %s: dtype %s is not supported (hir reads %s)", s.path, name, t.dtype, safetensorsSupported)
	}
	// The size was checked against the file's when it was opened.
	data := make([]byte, t.end-t.begin)
	if err := readFullAt(s.r, data, s.dataAt+t.begin); err != nil {
		return Stored{}, fmt.Errorf("%s: tensor %s: %v", s.path, name, err)
	}
	if dt == ir.Bool {
		for i, b := range data {
			if b > 1 {
				data[i] = 1
			}
		}
	}
	return Stored{Array: &Array{DType: dt, Shape: slices.Clone(t.shape), Data: data}, Descr: t.dtype}, nil
}

func namesText(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Close closes the file.
func (s *SafeTensors) Close() error {
	if s.closer == nil {
		return nil
	}
	return s.closer.Close()
}

// WriteSafeTensors writes arrays as a safetensors file, arrays[i] named
// names[i], with metadata as the header's __metadata__ (none if nil). The
// bytes are those safetensors.torch.save_file (and the Rust library under
// it) writes for the same tensors: the tensors ordered by dtype, largest
// alignment first (the library's Dtype enum order: I64, F64, F32, I32,
// BF16, F16, BOOL among hir's), then by name, byte-wise; the header
// compact JSON ("__metadata__" first, then each tensor's dtype, shape and
// data_offsets, in that order), padded with spaces to a multiple of 8
// bytes. bf16 is written as BF16, its bits as they are. The library's
// metadata is a hash map, written in no fixed order; here its keys are
// sorted, which is the library's bytes whenever it has one key.
func WriteSafeTensors(w io.Writer, names []string, arrays []*Array, metadata map[string]string) error {
	if len(names) != len(arrays) {
		return fmt.Errorf("write safetensors: %d names for %d arrays", len(names), len(arrays))
	}
	type entry struct {
		name  string
		dtype string
		rank  int
		a     *Array
	}
	entries := make([]entry, len(names))
	seen := map[string]bool{}
	for i, a := range arrays {
		name := names[i]
		switch {
		case seen[name]:
			return fmt.Errorf("write safetensors: two arrays named %q", name)
		case name == safetensorsMetadataKey:
			return fmt.Errorf("write safetensors: an array may not be named %s (the header's metadata)", safetensorsMetadataKey)
		case !utf8.ValidString(name):
			return fmt.Errorf("write safetensors: the name %q is not UTF-8", name)
		}
		seen[name] = true
		dtype, d, ok := safetensorsDTypeOf(a.DType)
		if !ok {
			return fmt.Errorf("write safetensors: array %s: invalid dtype %v", name, a.DType)
		}
		if want, ok := ir.MulChecked(a.Len(), int64(a.DType.Size())); !ok || want != int64(len(a.Data)) {
			return fmt.Errorf("write safetensors: array %s: %s holds %d bytes of data", name, a.TypeString(), len(a.Data))
		}
		entries[i] = entry{name, dtype, d.rank, a}
	}
	slices.SortFunc(entries, func(x, y entry) int {
		if x.rank != y.rank {
			return y.rank - x.rank
		}
		return strings.Compare(x.name, y.name)
	})

	var h []byte
	h = append(h, '{')
	if metadata != nil {
		h = appendJSONString(h, safetensorsMetadataKey)
		h = append(h, ":{"...)
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if !utf8.ValidString(k) || !utf8.ValidString(metadata[k]) {
				return fmt.Errorf("write safetensors: metadata %q is not UTF-8", k)
			}
			if i > 0 {
				h = append(h, ',')
			}
			h = appendJSONString(h, k)
			h = append(h, ':')
			h = appendJSONString(h, metadata[k])
		}
		h = append(h, '}')
	}
	var offset int64
	for i, e := range entries {
		if i > 0 || metadata != nil {
			h = append(h, ',')
		}
		h = appendJSONString(h, e.name)
		h = append(h, `:{"dtype":`...)
		h = appendJSONString(h, e.dtype)
		h = append(h, `,"shape":[`...)
		for j, d := range e.a.Shape {
			if j > 0 {
				h = append(h, ',')
			}
			h = strconv.AppendInt(h, d, 10)
		}
		end := offset + int64(len(e.a.Data))
		h = append(h, `],"data_offsets":[`...)
		h = strconv.AppendInt(h, offset, 10)
		h = append(h, ',')
		h = strconv.AppendInt(h, end, 10)
		h = append(h, "]}"...)
		offset = end
	}
	h = append(h, '}')
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	if len(h) > safetensorsMaxHeader {
		return fmt.Errorf("write safetensors: the header would be %d bytes, past the format's limit of %d", len(h), safetensorsMaxHeader)
	}
	var pre [8]byte
	binary.LittleEndian.PutUint64(pre[:], uint64(len(h)))
	if _, err := w.Write(pre[:]); err != nil {
		return err
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	for _, e := range entries {
		if _, err := w.Write(e.a.Data); err != nil {
			return err
		}
	}
	return nil
}

// appendJSONString appends s as serde_json writes a string: quotes,
// backslashes and control characters escaped (\b \f \n \r \t, others as
// \u00xx), every other character, non-ASCII too, as it is.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, `\b`...)
		case c == '\f':
			b = append(b, `\f`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// WriteSafeTensorsFile writes arrays to path as a safetensors file (see
// WriteSafeTensors); errors name the file.
func WriteSafeTensorsFile(path string, names []string, arrays []*Array, metadata map[string]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = WriteSafeTensors(bw, names, arrays, metadata)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}
