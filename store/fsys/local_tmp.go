package fsys

// A stand-in for the real Local (being written on another branch): no
// symlink guard. Deleted when that branch is merged.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Local is FS on a local directory.
type Local struct{ root string }

// NewLocal opens root (creating it).
func NewLocal(root string) (*Local, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	return &Local{root: abs}, nil
}

// Root is the absolute root, for logs.
func (l *Local) Root() string { return l.root }

// Close releases nothing.
func (l *Local) Close() error { return nil }

func (l *Local) abs(name string) (string, error) {
	if name == "" {
		return l.root, nil
	}
	if path.Clean(name) != name || strings.HasPrefix(name, "/") || strings.HasPrefix(name, "..") || strings.ContainsAny(name, "\\\x00") {
		return "", ErrUnsafePath
	}
	return filepath.Join(l.root, filepath.FromSlash(name)), nil
}

func (l *Local) rel(err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		r, _ := filepath.Rel(l.root, pe.Path)
		return &fs.PathError{Op: pe.Op, Path: filepath.ToSlash(r), Err: pe.Err}
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		r, _ := filepath.Rel(l.root, le.New)
		return &fs.PathError{Op: le.Op, Path: filepath.ToSlash(r), Err: le.Err}
	}
	return err
}

func rnd() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

func (l *Local) writeTemp(p string, data []byte) (string, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(filepath.Dir(p), "."+rnd()+"."+filepath.Base(p)+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// CreateExclusive implements FS.
func (l *Local) CreateExclusive(ctx context.Context, name string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := l.abs(name)
	if err != nil {
		return err
	}
	tmp, err := l.writeTemp(p, data)
	if err != nil {
		return l.rel(err)
	}
	err = os.Link(tmp, p)
	os.Remove(tmp)
	if err != nil {
		return l.rel(err)
	}
	return l.rel(syncDir(filepath.Dir(p)))
}

type localWriter struct {
	l        *Local
	f        *os.File
	tmp, dst string
	done     bool
}

// Create implements FS.
func (l *Local) Create(ctx context.Context, name string) (Writer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := l.abs(name)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, l.rel(err)
	}
	tmp := filepath.Join(filepath.Dir(p), "."+rnd()+"."+filepath.Base(p)+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, l.rel(err)
	}
	return &localWriter{l: l, f: f, tmp: tmp, dst: p}, nil
}

func (w *localWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	return n, w.l.rel(err)
}

func (w *localWriter) Commit(ctx context.Context) error {
	if w.done {
		return errors.New("fsys: committed twice")
	}
	if err := w.f.Sync(); err != nil {
		return w.l.rel(err)
	}
	if err := w.f.Close(); err != nil {
		return w.l.rel(err)
	}
	w.f = nil
	if err := os.Chmod(w.tmp, 0o444); err != nil {
		return w.l.rel(err)
	}
	if err := os.Link(w.tmp, w.dst); err != nil {
		return w.l.rel(err)
	}
	w.done = true
	os.Remove(w.tmp)
	return w.l.rel(syncDir(filepath.Dir(w.dst)))
}

func (w *localWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	if w.f != nil {
		w.f.Close()
	}
	if err := os.Remove(w.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return w.l.rel(err)
	}
	return nil
}

func token(b []byte) Token {
	h := sha256.Sum256(b)
	return Token(hex.EncodeToString(h[:]))
}

// ReadFile implements FS.
func (l *Local) ReadFile(ctx context.Context, name string) ([]byte, Token, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	p, err := l.abs(name)
	if err != nil {
		return nil, "", err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, "", l.rel(err)
	}
	return b, token(b), nil
}

// Replace implements FS.
func (l *Local) Replace(ctx context.Context, name string, data []byte, ifMatch Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := l.abs(name)
	if err != nil {
		return err
	}
	cur, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if ifMatch != "" {
			return ErrPrecondition
		}
	case err != nil:
		return l.rel(err)
	case token(cur) != ifMatch:
		return ErrPrecondition
	}
	tmp, err := l.writeTemp(p, data)
	if err != nil {
		return l.rel(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return l.rel(err)
	}
	return l.rel(syncDir(filepath.Dir(p)))
}

type localFile struct {
	*os.File
	size int64
}

func (f localFile) Size() int64 { return f.size }

// Open implements FS.
func (l *Local) Open(ctx context.Context, name string) (File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := l.abs(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, l.rel(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, l.rel(err)
	}
	if st.IsDir() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	}
	return localFile{f, st.Size()}, nil
}

// Stat implements FS.
func (l *Local) Stat(ctx context.Context, name string) (Entry, error) {
	p, err := l.abs(name)
	if err != nil {
		return Entry{}, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return Entry{}, l.rel(err)
	}
	e := Entry{Name: name, Dir: st.IsDir(), ModTime: st.ModTime()}
	if !e.Dir {
		e.Size = st.Size()
	}
	return e, nil
}

// List implements FS.
func (l *Local) List(ctx context.Context, dir string) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := l.abs(dir)
	if err != nil {
		return nil, err
	}
	des, err := os.ReadDir(p)
	if err != nil {
		return nil, l.rel(err)
	}
	out := make([]Entry, 0, len(des))
	for _, d := range des {
		e := Entry{Name: d.Name(), Dir: d.IsDir(), Link: d.Type()&fs.ModeSymlink != 0}
		if info, err := d.Info(); err == nil {
			e.ModTime = info.ModTime()
			if !e.Dir {
				e.Size = info.Size()
			}
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Mkdir implements FS.
func (l *Local) Mkdir(ctx context.Context, name string) error {
	p, err := l.abs(name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return l.rel(err)
	}
	return l.rel(os.Mkdir(p, 0o755))
}

// Delete implements FS.
func (l *Local) Delete(ctx context.Context, name string) error {
	p, err := l.abs(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return l.rel(err)
	}
	return nil
}

// DeleteAll implements FS.
func (l *Local) DeleteAll(ctx context.Context, dir string) error {
	p, err := l.abs(dir)
	if err != nil {
		return err
	}
	return l.rel(os.RemoveAll(p))
}
