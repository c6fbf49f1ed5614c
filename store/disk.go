package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// FS is the store's one narrow way to the disk, so that an object-store
// backend (put-if-absent, compare-and-swap) can be added without touching the
// layers above. Names are slash-separated and relative to the data directory;
// the store validates them before they get here.
//
// Contract: CreateExclusive and Mkdir fail with an error matching
// fs.ErrExist when the name is taken, atomically with respect to every other
// process on the same file system (O_EXCL, atomic mkdir). A TempFile is
// invisible to readers until Publish; Publish with replace=false never
// overwrites an existing name. Everything Publish and CreateExclusive
// returned nil for is durable (file and directory entry synced).
type FS interface {
	CreateExclusive(name string, data []byte) error
	CreateTemp(dir, suffix string) (TempFile, error)
	Mkdir(name string) error
	MkdirAll(name string) error
	ReadDir(name string) ([]fs.DirEntry, error)
	Open(name string) (File, error)
	ReadFile(name string) ([]byte, error)
	Stat(name string) (fs.FileInfo, error)
	Lstat(name string) (fs.FileInfo, error)
	Remove(name string) error
	RemoveAll(name string) error
}

// File is an open data file: random access for Parquet footers, sequential
// reads for CSV and hashing.
type File interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
}

// TempFile is a hidden file being written. Either Publish or Abort must be
// called; data is not visible (nor durable) until Publish returns nil.
type TempFile interface {
	io.Writer
	// Name is the temp file's name relative to the data directory.
	Name() string
	// Publish syncs the file, makes it read-only when readOnly is set, and
	// moves it to final. With replace=false an existing final is an error
	// matching fs.ErrExist and the temp is left for Abort.
	Publish(final string, replace, readOnly bool) error
	// Abort closes and removes the temp file. Safe after a failed Publish and
	// a no-op after a successful one.
	Abort() error
}

// tempSuffix ends every temp file's name; pyrosome names its temps
// ".<uuid><suffix>.tmp" in the directory they will be published to.
const tempSuffix = ".tmp"

// localFS is FS on a local or NFS-mounted directory.
type localFS struct {
	root string
}

// NewLocalFS returns the FS for a directory on a local (or NFS) file system.
func NewLocalFS(root string) FS { return &localFS{root: root} }

func (l *localFS) abs(name string) string {
	return filepath.Join(l.root, filepath.FromSlash(name))
}

func randomHex() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

func (l *localFS) CreateExclusive(name string, data []byte) (err error) {
	if len(data) > 0 {
		// Write-then-link: a reader (or a crash) never sees the name with
		// partial content, and link fails with EEXIST rather than replacing.
		return l.createExclusiveLinked(name, data)
	}
	p := l.abs(name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if len(data) > 0 {
		if _, err = f.Write(data); err != nil {
			return err
		}
	}
	if err = f.Sync(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(p))
}

// createExclusiveLinked writes data to a hidden temp file in the same
// directory, syncs it and links it to name; the temp is removed either way.
func (l *localFS) createExclusiveLinked(name string, data []byte) error {
	p := l.abs(name)
	tmp := filepath.Join(filepath.Dir(p), "."+randomHex()+tempSuffix)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Link(tmp, p)
	}
	if rerr := os.Remove(tmp); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(p))
}

func (l *localFS) CreateTemp(dir, suffix string) (TempFile, error) {
	name := path.Join(dir, "."+randomHex()+suffix+tempSuffix)
	f, err := os.OpenFile(l.abs(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, l.rel(err)
	}
	return &localTemp{fs: l, f: f, name: name}, nil
}

func (l *localFS) Mkdir(name string) error { return l.rel(os.Mkdir(l.abs(name), 0o755)) }

func (l *localFS) MkdirAll(name string) error { return l.rel(os.MkdirAll(l.abs(name), 0o755)) }

func (l *localFS) ReadDir(name string) ([]fs.DirEntry, error) {
	e, err := os.ReadDir(l.abs(name))
	return e, l.rel(err)
}

func (l *localFS) Open(name string) (File, error) {
	f, err := os.Open(l.abs(name))
	if err != nil {
		return nil, l.rel(err)
	}
	return f, nil
}

func (l *localFS) ReadFile(name string) ([]byte, error) {
	b, err := os.ReadFile(l.abs(name))
	return b, l.rel(err)
}

func (l *localFS) Stat(name string) (fs.FileInfo, error) {
	st, err := os.Stat(l.abs(name))
	return st, l.rel(err)
}

func (l *localFS) Lstat(name string) (fs.FileInfo, error) {
	st, err := os.Lstat(l.abs(name))
	return st, l.rel(err)
}

// rel rewrites the paths inside os errors relative to the data directory,
// so that no error the store returns shows where the data lives.
func (l *localFS) rel(err error) error {
	if err == nil {
		return nil
	}
	strip := func(p string) string {
		if r, rerr := filepath.Rel(l.root, p); rerr == nil && !strings.HasPrefix(r, "..") {
			return filepath.ToSlash(r)
		}
		return filepath.Base(p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: strip(pe.Path), Err: pe.Err}
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return &os.LinkError{Op: le.Op, Old: strip(le.Old), New: strip(le.New), Err: le.Err}
	}
	return err
}

func (l *localFS) Remove(name string) (err error) {
	defer func() { err = l.rel(err) }()
	p := l.abs(name)
	err = os.Remove(p)
	if errors.Is(err, fs.ErrPermission) {
		// Data files are read-only; the directory's write bit is what counts
		// on POSIX, but be explicit for file systems that disagree.
		_ = os.Chmod(p, 0o644)
		err = os.Remove(p)
	}
	return err
}

func (l *localFS) RemoveAll(name string) error { return l.rel(os.RemoveAll(l.abs(name))) }

type localTemp struct {
	fs     *localFS
	f      *os.File
	name   string
	closed bool
	done   bool
}

func (t *localTemp) Write(p []byte) (int, error) {
	n, err := t.f.Write(p)
	return n, t.fs.rel(err)
}

func (t *localTemp) Name() string { return t.name }

func (t *localTemp) close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	return t.f.Close()
}

func (t *localTemp) Publish(final string, replace, readOnly bool) (err error) {
	defer func() { err = t.fs.rel(err) }()
	if t.done {
		return fmt.Errorf("publish %s: already published", final)
	}
	if !t.closed {
		if err := t.f.Sync(); err != nil {
			return err
		}
		if err := t.close(); err != nil {
			return err
		}
	}
	src, dst := t.fs.abs(t.name), t.fs.abs(final)
	if readOnly {
		if err := os.Chmod(src, 0o444); err != nil {
			return err
		}
	}
	if replace {
		if err := os.Rename(src, dst); err != nil {
			return err
		}
	} else {
		// link fails with EEXIST instead of replacing, and is atomic on NFS
		// too; the temp name is removed afterwards.
		if err := os.Link(src, dst); err != nil {
			return err
		}
		if err := os.Remove(src); err != nil {
			return err
		}
	}
	t.done = true
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return err
	}
	if d := filepath.Dir(src); d != filepath.Dir(dst) {
		return syncDir(d)
	}
	return nil
}

func (t *localTemp) Abort() error {
	cerr := t.close()
	if t.done {
		return nil
	}
	t.done = true
	err := os.Remove(t.fs.abs(t.name))
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return t.fs.rel(errors.Join(cerr, err))
}

// syncDir makes a directory's entries (a rename, a create) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	if errors.Is(serr, os.ErrInvalid) { // some file systems cannot sync dirs
		serr = nil
	}
	return errors.Join(serr, d.Close())
}

// isTempName reports whether a directory entry is a hidden temp file.
func isTempName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.HasSuffix(name, tempSuffix)
}
