package gpu

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The kernel cache. A compiled image (cubin) is keyed by the SHA-256 of
// the source, the target architecture, the NVRTC options and NVRTC's
// version, and kept at three levels:
//
//   - per device, the loaded function (a module lives in one context);
//   - per process, the cubin, so another device of the process loads it
//     without compiling;
//   - on disk, under os.UserCacheDir()/hir/kernels (HIR_KERNEL_CACHE: a
//     directory to use instead, or "off"), so a second process starts
//     without compiling.
//
// The disk cache is best effort: a file that cannot be read, written or
// loaded is recompiled (and rewritten), never an error.

// EnvKernelCache names the disk cache's directory, or turns it off with
// "off" (also "0", "none", "false").
const EnvKernelCache = "HIR_KERNEL_CACHE"

// KernelCacheStats counts where compiled images came from, process-wide.
type KernelCacheStats struct {
	Compiles    int64 // NVRTC runs
	MemoryHits  int64 // found among this process's images
	DiskHits    int64 // read from the disk cache
	DiskWrites  int64 // written to the disk cache
	DiskErrors  int64 // unreadable, unwritable or unloadable cache files (then recompiled)
	CompileTime float64
	Dir         string // the disk cache's directory; empty when off
}

var images = struct {
	mu sync.Mutex
	m  map[string][]byte

	compiles, memHits, diskHits, diskWrites, diskErrors atomic.Int64
	compileNanos                                        atomic.Int64
}{m: map[string][]byte{}}

// KernelCache reports the process's kernel-cache counters.
func KernelCache() KernelCacheStats {
	dir, _ := KernelCacheDir()
	return KernelCacheStats{
		Compiles: images.compiles.Load(), MemoryHits: images.memHits.Load(), DiskHits: images.diskHits.Load(),
		DiskWrites: images.diskWrites.Load(), DiskErrors: images.diskErrors.Load(),
		CompileTime: float64(images.compileNanos.Load()) / 1e9, Dir: dir,
	}
}

// kernelCacheDir is the disk cache's directory, and false when it is off.
func KernelCacheDir() (string, bool) {
	v := os.Getenv(EnvKernelCache)
	switch strings.ToLower(v) {
	case "off", "0", "none", "false":
		return "", false
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			return "", false
		}
		return filepath.Join(base, "hir", "kernels"), true
	}
	return v, true
}

// imageKey identifies a compiled image.
func ImageKey(src string, cc [2]int, opts []string, nvrtc string) string {
	h := sha256.New()
	fmt.Fprintf(h, "hir-kernel-v1\x00sm_%d%d\x00%s\x00%s\x00", cc[0], cc[1], strings.Join(opts, " "), nvrtc)
	h.Write([]byte(src))
	return hex.EncodeToString(h.Sum(nil))
}

var NvrtcVersionOnce = sync.OnceValue(func() string {
	major, minor, err := NVRTCVersion()
	if err != nil {
		return "nvrtc-unknown"
	}
	return fmt.Sprintf("nvrtc-%d.%d", major, minor)
})

// elfMagic starts every cubin.
var ElfMagic = []byte{0x7f, 'E', 'L', 'F'}

// compiling is the NVRTC runs in flight, by image key: a second caller
// for the same image (a collective's first launch while WarmCollectives
// compiles its module in the background) waits for the first run instead
// of compiling it again.
var compiling = struct {
	mu sync.Mutex
	m  map[string]*compileRun
}{m: map[string]*compileRun{}}

type compileRun struct {
	done chan struct{}
	img  []byte
	err  error
}

// compileImage is NVRTC (a variable so a test can count its runs).
var compileImage = CompileCUDA

// cachedImage returns the cubin of src for cc: from memory, the disk, or
// NVRTC. from says which ("memory", "disk", "nvrtc"). skipDisk ignores a
// disk entry (after it failed to load).
func CachedImage(key, src, name string, cc [2]int, opts []string, skipDisk bool) (img []byte, from string, err error) {
	images.mu.Lock()
	img, ok := images.m[key]
	images.mu.Unlock()
	if ok && !skipDisk {
		images.memHits.Add(1)
		return img, "memory", nil
	}
	dir, disk := KernelCacheDir()
	path := filepath.Join(dir, key+".cubin")
	if disk && !skipDisk {
		if b, err := os.ReadFile(path); err == nil {
			if bytes.HasPrefix(b, ElfMagic) {
				images.diskHits.Add(1)
				images.mu.Lock()
				images.m[key] = b
				images.mu.Unlock()
				return b, "disk", nil
			}
			images.diskErrors.Add(1)
		} else if !errors.Is(err, os.ErrNotExist) {
			images.diskErrors.Add(1)
		}
	}
	compiling.mu.Lock()
	if run, ok := compiling.m[key]; ok {
		compiling.mu.Unlock()
		<-run.done
		if run.err != nil {
			return nil, "nvrtc", run.err
		}
		images.memHits.Add(1)
		return run.img, "memory", nil
	}
	run := &compileRun{done: make(chan struct{})}
	compiling.m[key] = run
	compiling.mu.Unlock()
	defer func() {
		run.img, run.err = img, err
		compiling.mu.Lock()
		delete(compiling.m, key)
		compiling.mu.Unlock()
		close(run.done)
	}()
	start := time.Now()
	img, err = compileImage(src, name, cc, opts...)
	images.compileNanos.Add(int64(time.Since(start)))
	images.compiles.Add(1)
	if err != nil {
		return nil, "nvrtc", err
	}
	images.mu.Lock()
	images.m[key] = img
	images.mu.Unlock()
	if disk {
		if err := WriteAtomic(dir, path, img); err != nil {
			images.diskErrors.Add(1)
		} else {
			images.diskWrites.Add(1)
		}
	}
	return img, "nvrtc", nil
}

// forgetImage drops a key from memory and disk (its image did not load).
func ForgetImage(key string) {
	images.mu.Lock()
	delete(images.m, key)
	images.mu.Unlock()
	if dir, ok := KernelCacheDir(); ok {
		os.Remove(filepath.Join(dir, key+".cubin"))
	}
}

// writeAtomic writes data to path through a temporary file and a rename,
// so a reader never sees half a file (two processes may race to write it).
// The directory is private to the user: it holds code the GPU runs.
func WriteAtomic(dir, path string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*.cubin")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		os.Remove(f.Name())
	}
	return werr
}

// SourceError is a kernel that NVRTC rejected: the compile error (with the
// log) and the path of the generated source, written out to read or to
// compile by hand.
type SourceError struct {
	Kernel     string
	SourcePath string // empty when the source could not be written
	Err        error
}

func (e *SourceError) Error() string {
	if e.SourcePath == "" {
		return fmt.Sprintf("%v\n(the generated source of %s could not be saved)", e.Err, e.Kernel)
	}
	return fmt.Sprintf("%v\nthe generated source is in %s", e.Err, e.SourcePath)
}

func (e *SourceError) Unwrap() error { return e.Err }

// saveSource writes a failed kernel's source to a temporary file.
func SaveSource(name, src string) string {
	f, err := os.CreateTemp("", "hir-"+name+"-*.cu")
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.WriteString(src); err != nil {
		return ""
	}
	return f.Name()
}

// loadedKernel is a function loaded on one device.
type loadedKernel struct {
	Fn   *Function
	From string // where its image came from: memory, disk or nvrtc
}

// kernelTable is the kernels loaded on a device (loadKernel), compute's
// and the collectives' alike.
type kernelTable struct {
	mu      sync.Mutex
	loaded  map[string]*loadedKernel // by image key and kernel name
	modules []*Module
	closed  bool
}

// closeKernels unloads the table's modules (from close, with the context
// still held).
func (d *Device) closeKernels() error {
	c := &d.kernels
	c.mu.Lock()
	mods := c.modules
	c.modules, c.loaded, c.closed = nil, nil, true
	c.mu.Unlock()
	var errs []error
	for _, m := range mods {
		errs = append(errs, m.Unload())
	}
	return errors.Join(errs...)
}

// loadKernel returns src's kernel name, loaded on d: from the device's
// table, else from an image of the cache (compiled when needed). opts are
// NVRTC options besides the architecture.
func (d *Device) LoadKernel(src, name string, opts []string) (*loadedKernel, error) {
	cc := d.Props.ComputeCapability
	opts = NvrtcOptions(opts)
	key := ImageKey(src, cc, opts, NvrtcVersionOnce())
	c := &d.kernels
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("cuda: rank %d: runtime closed", d.Opts.Rank)
	}
	if lk := c.loaded[key+"|"+name]; lk != nil {
		return lk, nil
	}
	var mod *Module
	var from string
	for attempt := 0; ; attempt++ {
		img, src2, err := CachedImage(key, src, name+".cu", cc, opts, attempt > 0)
		if err != nil {
			return nil, &SourceError{Kernel: name, SourcePath: SaveSource(name, src), Err: err}
		}
		from = src2
		mod, err = d.LoadModule(img)
		if err == nil {
			break
		}
		if from == "nvrtc" || attempt > 0 {
			return nil, err
		}
		// A cached image the driver refuses (a damaged file): compile anew.
		images.diskErrors.Add(1)
		ForgetImage(key)
	}
	fn, err := mod.Function(name)
	if err != nil {
		mod.Unload()
		return nil, err
	}
	c.modules = append(c.modules, mod)
	lk := &loadedKernel{Fn: fn, From: from}
	if c.loaded == nil {
		c.loaded = map[string]*loadedKernel{}
	}
	c.loaded[key+"|"+name] = lk
	return lk, nil
}

// nvrtcOptions drops what CompileCUDA sets itself (the architecture and
// the language standard), so no option is given twice.
func NvrtcOptions(opts []string) []string {
	var out []string
	for _, o := range opts {
		if strings.HasPrefix(o, "--std=") || strings.HasPrefix(o, "-std=") || strings.HasPrefix(o, "--gpu-architecture") || strings.HasPrefix(o, "-arch") {
			continue
		}
		out = append(out, o)
	}
	return out
}

// LoadCached compiles src (file name name, NVRTC options opts) for this
// device through the kernel cache (memory, then disk, then NVRTC), so the
// ranks of a job and later runs do not compile again; a cached image the
// driver refuses is compiled anew.
func (d *Device) LoadCached(src, name string, opts []string) (*Module, error) {
	key := d.imageKey(src, opts)
	for attempt := 0; ; attempt++ {
		img, from, err := CachedImage(key, src, name, d.Props.ComputeCapability, opts, attempt > 0)
		if err != nil {
			return nil, &SourceError{Kernel: name, SourcePath: SaveSource(strings.TrimSuffix(name, ".cu"), src), Err: err}
		}
		m, err := d.LoadModule(img)
		if err == nil {
			return m, nil
		}
		if from == "nvrtc" || attempt > 0 {
			return nil, err
		}
		ForgetImage(key)
	}
}

// CompileCached puts src's image for this device in the kernel cache
// (compiling it unless it is there already) without loading it.
func (d *Device) CompileCached(src, name string, opts []string) error {
	_, _, err := CachedImage(d.imageKey(src, opts), src, name, d.Props.ComputeCapability, opts, false)
	return err
}

func (d *Device) imageKey(src string, opts []string) string {
	return ImageKey(src, d.Props.ComputeCapability, opts, NvrtcVersionOnce())
}
