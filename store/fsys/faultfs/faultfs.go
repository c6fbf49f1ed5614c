// Package faultfs wraps an fsys.FS and fails chosen calls with chosen
// errors, for tests: a disk that fills up (syscall.ENOSPC) from the Nth
// write on, an I/O error on one read, a Commit that fails. Rules can be
// added and cleared while the FS is in use, and every call is counted.
//
// With no rule active it is the FS it wraps (and passes fsystest).
package faultfs

import (
	"context"
	"fmt"
	"math/bits"
	"path"
	"strings"
	"sync"

	"github.com/quiverdb/quiver/store/fsys"
)

// Op is a set of operations (a bit mask): the FS methods, plus Write,
// Commit (Writer) and Read (File: Read and ReadAt).
type Op uint32

// The operations a Rule can fail.
const (
	CreateExclusive Op = 1 << iota
	Create
	Write
	Commit
	ReadFile
	Replace
	Open
	Read
	Stat
	List
	Mkdir
	Delete
	DeleteAll

	numOps = iota

	// Writes are the operations a full disk fails.
	Writes = CreateExclusive | Create | Write | Commit | Replace | Mkdir
	// Reads are the operations that read.
	Reads = ReadFile | Open | Read | Stat | List
	// All is every operation.
	All Op = 1<<numOps - 1
)

var opNames = [numOps]string{
	"CreateExclusive", "Create", "Write", "Commit", "ReadFile", "Replace",
	"Open", "Read", "Stat", "List", "Mkdir", "Delete", "DeleteAll",
}

// String names the operations in o, joined by "|".
func (o Op) String() string {
	var names []string
	for i, n := range opNames {
		if o&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("Op(%#x)", uint32(o))
	}
	return strings.Join(names, "|")
}

// Rule fails matching calls with Err. A call matches when its operation
// is in Op and its name matches Glob. The rule counts the calls it matches
// and fails the Nth (1-based) if Nth is set, else every one after the
// first After.
type Rule struct {
	// Op is the operations the rule applies to (one or several).
	Op Op
	// Glob is a path.Match pattern. Without a "/" it is matched against
	// the last element of the name ("*.parquet"), with one against the
	// whole name ("v*/0.parquet"). Empty matches every name. Writes,
	// Commits and Reads carry the name their Writer or File was made for;
	// List carries its directory.
	Glob string
	// Err is the error injected (wrapped in an *InjectedError, so that
	// errors.Is(err, Err) holds).
	Err error
	// After lets that many matching calls through before failing.
	After int
	// Nth, if positive, fails only the Nth matching call.
	Nth int
}

// InjectedError is the error a rule injected.
type InjectedError struct {
	Op   Op
	Name string
	Err  error
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("faultfs: injected into %v %q: %v", e.Op, e.Name, e.Err)
}

// Unwrap returns the rule's error.
func (e *InjectedError) Unwrap() error { return e.Err }

type rule struct {
	Rule
	full bool // Glob is matched against the whole name
	seen int
}

// FS is an fsys.FS that fails calls as its rules say. It is safe for
// concurrent use.
type FS struct {
	inner fsys.FS

	mu       sync.Mutex
	rules    []*rule
	calls    [numOps]int
	injected [numOps]int
}

// New wraps inner with rules (more can be added with Add).
func New(inner fsys.FS, rules ...Rule) *FS {
	f := &FS{inner: inner}
	f.Add(rules...)
	return f
}

// Add adds rules. It panics on a rule that could never fire (no Op, no
// Err, a malformed Glob): a test bug.
func (f *FS) Add(rules ...Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range rules {
		if r.Op&All == 0 || r.Err == nil {
			panic(fmt.Sprintf("faultfs: rule %+v has no Op or no Err", r))
		}
		if _, err := path.Match(r.Glob, ""); err != nil {
			panic(fmt.Sprintf("faultfs: rule glob %q: %v", r.Glob, err))
		}
		f.rules = append(f.rules, &rule{Rule: r, full: strings.Contains(r.Glob, "/")})
	}
}

// Clear removes every rule (the disk is no longer full). Counters stay.
func (f *FS) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// Calls is the number of calls of the operations in op so far, failed or
// not.
func (f *FS) Calls(op Op) int { return f.count(&f.calls, op) }

// Injected is the number of calls of the operations in op that a rule
// failed.
func (f *FS) Injected(op Op) int { return f.count(&f.injected, op) }

func (f *FS) count(c *[numOps]int, op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for i := range c {
		if op&(1<<i) != 0 {
			n += c[i]
		}
	}
	return n
}

// Inner is the wrapped FS.
func (f *FS) Inner() fsys.FS { return f.inner }

// fault counts a call of op (exactly one bit) on name and returns the
// error to inject, if a rule says so.
func (f *FS) fault(op Op, name string) error {
	i := bits.TrailingZeros32(uint32(op))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[i]++
	var err error
	for _, r := range f.rules {
		if r.Op&op == 0 || !r.matches(name) {
			continue
		}
		r.seen++
		fire := r.seen > r.After
		if r.Nth > 0 {
			fire = r.seen == r.Nth
		}
		if fire && err == nil {
			err = &InjectedError{Op: op, Name: name, Err: r.Err}
		}
	}
	if err != nil {
		f.injected[i]++
	}
	return err
}

func (r *rule) matches(name string) bool {
	if r.Glob == "" {
		return true
	}
	if !r.full {
		name = path.Base(name)
	}
	ok, _ := path.Match(r.Glob, name)
	return ok
}

// CreateExclusive implements fsys.FS.
func (f *FS) CreateExclusive(ctx context.Context, name string, data []byte) error {
	if err := f.fault(CreateExclusive, name); err != nil {
		return err
	}
	return f.inner.CreateExclusive(ctx, name, data)
}

// Create implements fsys.FS; the Writer's Write and Commit are subject to
// rules too.
func (f *FS) Create(ctx context.Context, name string) (fsys.Writer, error) {
	if err := f.fault(Create, name); err != nil {
		return nil, err
	}
	w, err := f.inner.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &writer{f: f, name: name, w: w}, nil
}

// ReadFile implements fsys.FS.
func (f *FS) ReadFile(ctx context.Context, name string) ([]byte, fsys.Token, error) {
	if err := f.fault(ReadFile, name); err != nil {
		return nil, "", err
	}
	return f.inner.ReadFile(ctx, name)
}

// Replace implements fsys.FS.
func (f *FS) Replace(ctx context.Context, name string, data []byte, ifMatch fsys.Token) error {
	if err := f.fault(Replace, name); err != nil {
		return err
	}
	return f.inner.Replace(ctx, name, data, ifMatch)
}

// Open implements fsys.FS; the File's Read and ReadAt are subject to
// rules too.
func (f *FS) Open(ctx context.Context, name string) (fsys.File, error) {
	if err := f.fault(Open, name); err != nil {
		return nil, err
	}
	r, err := f.inner.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return &file{File: r, f: f, name: name}, nil
}

// Stat implements fsys.FS.
func (f *FS) Stat(ctx context.Context, name string) (fsys.Entry, error) {
	if err := f.fault(Stat, name); err != nil {
		return fsys.Entry{}, err
	}
	return f.inner.Stat(ctx, name)
}

// List implements fsys.FS.
func (f *FS) List(ctx context.Context, dir string) ([]fsys.Entry, error) {
	if err := f.fault(List, dir); err != nil {
		return nil, err
	}
	return f.inner.List(ctx, dir)
}

// Mkdir implements fsys.FS.
func (f *FS) Mkdir(ctx context.Context, name string) error {
	if err := f.fault(Mkdir, name); err != nil {
		return err
	}
	return f.inner.Mkdir(ctx, name)
}

// Delete implements fsys.FS.
func (f *FS) Delete(ctx context.Context, name string) error {
	if err := f.fault(Delete, name); err != nil {
		return err
	}
	return f.inner.Delete(ctx, name)
}

// DeleteAll implements fsys.FS.
func (f *FS) DeleteAll(ctx context.Context, dir string) error {
	if err := f.fault(DeleteAll, dir); err != nil {
		return err
	}
	return f.inner.DeleteAll(ctx, dir)
}

// writer injects Write and Commit faults. Like a real disk's, a failed
// Write fails the Writer: its Commit fails too.
type writer struct {
	f    *FS
	name string
	w    fsys.Writer
	err  error // the injected Write error
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if err := w.f.fault(Write, w.name); err != nil {
		w.err = err
		return 0, err
	}
	return w.w.Write(p)
}

// Commit fails (and discards the object, as a real failed Commit does)
// when a rule says so or a Write was failed.
func (w *writer) Commit(ctx context.Context) error {
	err := w.f.fault(Commit, w.name)
	if err == nil {
		err = w.err
	}
	if err != nil {
		w.w.Abort()
		return err
	}
	return w.w.Commit(ctx)
}

func (w *writer) Abort() error { return w.w.Abort() }

// file injects Read faults into Read and ReadAt.
type file struct {
	fsys.File
	f    *FS
	name string
}

func (r *file) Read(p []byte) (int, error) {
	if err := r.f.fault(Read, r.name); err != nil {
		return 0, err
	}
	return r.File.Read(p)
}

func (r *file) ReadAt(p []byte, off int64) (int, error) {
	if err := r.f.fault(Read, r.name); err != nil {
		return 0, err
	}
	return r.File.ReadAt(p, off)
}

var _ fsys.FS = (*FS)(nil)
