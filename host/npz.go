package host

// NPZ archives (NumPy's np.savez and np.savez_compressed): a zip file with
// one NPY file per array, the member "x.npy" holding the array named x.
// Stored and deflated members are read (np.savez writes the first,
// np.savez_compressed the second); WriteNPZ stores, as np.savez does.

import (
	"archive/zip"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// NPZ is an open archive: its names are known at once, each array is read
// when asked for.
type NPZ struct {
	path    string // for messages
	names   []string
	members map[string]*zip.File
	closer  io.Closer // nil for an archive in memory
}

// OpenNPZ opens the NPZ archive at path; errors name the file.
func OpenNPZ(path string) (*NPZ, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		f, openErr := os.Open(path)
		if openErr != nil {
			return nil, openErr
		}
		f.Close()
		return nil, fmt.Errorf("%s: not an NPZ archive: %v", path, zipError(err))
	}
	z, err := newNPZ(path, &zr.Reader)
	if err != nil {
		zr.Close()
		return nil, err
	}
	z.closer = zr
	return z, nil
}

// ReadNPZ opens an NPZ archive of size bytes held by r; name is what
// errors call it.
func ReadNPZ(r io.ReaderAt, size int64, name string) (*NPZ, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: not an NPZ archive: %v", name, zipError(err))
	}
	return newNPZ(name, zr)
}

func zipError(err error) error {
	if errors.Is(err, zip.ErrFormat) {
		return errors.New("not a zip file")
	}
	return err
}

func newNPZ(path string, zr *zip.Reader) (*NPZ, error) {
	z := &NPZ{path: path, members: map[string]*zip.File{}}
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			continue // a directory entry
		}
		// np.load's key: the member's name less .npy.
		name := strings.TrimSuffix(f.Name, ".npy")
		if _, dup := z.members[name]; dup {
			return nil, fmt.Errorf("%s: the archive holds two arrays named %q", path, name)
		}
		z.members[name] = f
		z.names = append(z.names, name)
	}
	return z, nil
}

// Names are the arrays' names, in the archive's order.
func (z *NPZ) Names() []string { return z.names }

// Read reads the array called name.
func (z *NPZ) Read(name string) (Stored, error) {
	f, ok := z.members[name]
	if !ok {
		return Stored{}, fmt.Errorf("%s: no array named %q (it holds %s)", z.path, name, strings.Join(z.names, ", "))
	}
	rc, err := f.Open()
	if errors.Is(err, zip.ErrAlgorithm) {
		return Stored{}, fmt.Errorf("%s: array %s: compression method %d is not supported (stored and deflated are)", z.path, name, f.Method)
	}
	if err != nil {
		return Stored{}, fmt.Errorf("%s: array %s: %v", z.path, name, err)
	}
	defer rc.Close()
	s, err := ReadStoredNPY(bufio.NewReaderSize(rc, 1<<20))
	if err != nil {
		return Stored{}, fmt.Errorf("%s: array %s: %v", z.path, name, err)
	}
	// The zip reader checks the CRC only at the member's end.
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return Stored{}, fmt.Errorf("%s: array %s: %v", z.path, name, err)
	}
	return s, nil
}

// Close closes the archive's file.
func (z *NPZ) Close() error {
	if z.closer == nil {
		return nil
	}
	return z.closer.Close()
}

// npzTime is every member's time: the same arrays give the same bytes.
var npzTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// WriteNPZ writes arrays as an NPZ archive of stored members, arrays[i]
// under names[i] (as np.savez(names[i]=arrays[i], ...) would).
func WriteNPZ(w io.Writer, names []string, arrays []*Array) error {
	if len(names) != len(arrays) {
		return fmt.Errorf("write NPZ: %d names for %d arrays", len(names), len(arrays))
	}
	zw := zip.NewWriter(w)
	seen := map[string]bool{}
	for i, a := range arrays {
		if seen[names[i]] {
			return fmt.Errorf("write NPZ: two arrays named %q", names[i])
		}
		seen[names[i]] = true
		mw, err := zw.CreateHeader(&zip.FileHeader{Name: names[i] + ".npy", Method: zip.Store, Modified: npzTime})
		if err != nil {
			return err
		}
		if err := a.WriteNPY(mw); err != nil {
			return fmt.Errorf("write NPZ: array %s: %v", names[i], err)
		}
	}
	return zw.Close()
}

// WriteNPZFile writes arrays to path as an NPZ archive (see WriteNPZ).
func WriteNPZFile(path string, names []string, arrays []*Array) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = WriteNPZ(bw, names, arrays)
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
