// Package faultfs wraps an fsys.FS and fails chosen calls with chosen
// errors, for tests: a disk that fills up (syscall.ENOSPC) from the Nth
// write on, an I/O error on one read, a Commit that fails. Rules can be
// added and cleared while the FS is in use, and every call is counted.
//
// With no rule active it is the FS it wraps (and passes fsystest). It
// offers the optional interfaces of the storage it wraps, with the rules
// applying to them: fsys.Relaxed exactly when the wrapped FS is Relaxed
// (so that a store over it takes the same commit path as over the bare
// storage), fsys.DataSyncer on its Writers exactly when the wrapped
// Writers are DataSyncers, and always fsys.Marker and fsys.PairStater
// (which fall back to what the package functions fsys.CreateMarker and
// fsys.StatPair do without them, so that offering them changes nothing
// but the counting).
package faultfs

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"path"
	"strings"
	"sync"

	"github.com/quiverdb/quiver/store/fsys"
)

// Op is a set of operations (a bit mask): the FS methods, plus Write,
// Commit (Writer), Read (File: Read and ReadAt) and Sync (fsys.Relaxed's
// SyncDir and fsys.DataSyncer's Sync). The optional methods count as the
// FS method they relax: CreateExclusiveSync and CreateMarker as
// CreateExclusive, CreateSync as Create, ReplaceSync as Replace,
// DeleteSync as Delete, StatPair as a Stat of the directory and (if that
// one succeeds) a Stat of the name.
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
	// Sync is an fsync: fsys.Relaxed's SyncDir (its name is the
	// directory) and fsys.DataSyncer's Sync of a Writer.
	Sync

	numOps = iota

	// Writes are the operations a full disk fails. Sync is one of them:
	// with delayed allocation (ext4, XFS, btrfs) blocks are allocated
	// when dirty pages are written back, so fsync and fdatasync return
	// ENOSPC (or EDQUOT) on a full disk although every write(2) had
	// succeeded; and a directory's fsync commits metadata that may need
	// blocks too. Deletes are not: they free space.
	Writes = CreateExclusive | Create | Write | Commit | Replace | Mkdir | Sync
	// Reads are the operations that read.
	Reads = ReadFile | Open | Read | Stat | List
	// All is every operation.
	All Op = 1<<numOps - 1
)

var opNames = [numOps]string{
	"CreateExclusive", "Create", "Write", "Commit", "ReadFile", "Replace",
	"Open", "Read", "Stat", "List", "Mkdir", "Delete", "DeleteAll", "Sync",
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
	// Commits, Reads and a Writer's Sync carry the name their Writer or
	// File was made for; List and SyncDir carry their directory.
	Glob string
	// Err is the error injected (wrapped in an *InjectedError, so that
	// errors.Is(err, Err) holds).
	Err error
	// After lets that many matching calls through before failing.
	After int
	// Nth, if positive, fails only the Nth matching call.
	Nth int
	// Landed makes the call first and returns the error after it
	// succeeded: a request the storage took whose answer was lost (object
	// storage over a network). For CreateExclusive and a Writer's Commit;
	// other operations fail as without it.
	Landed bool
}

// InjectedError is the error a rule injected.
type InjectedError struct {
	Op   Op
	Name string
	Err  error
	// Landed: the call was made (Rule.Landed).
	Landed bool
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

// FS is an fsys.FS that fails calls as its rules say, with the methods
// that control the rules. It is safe for concurrent use. The FS New
// returns is an fsys.Relaxed too when the FS it wraps is one.
type FS interface {
	fsys.FS
	fsys.Marker
	fsys.PairStater
	// Add adds rules. It panics on a rule that could never fire (no Op,
	// no Err, a malformed Glob): a test bug.
	Add(rules ...Rule)
	// Clear removes every rule (the disk is no longer full). Counters
	// stay.
	Clear()
	// Calls is the number of calls of the operations in op so far,
	// failed or not.
	Calls(op Op) int
	// Injected is the number of calls of the operations in op that a
	// rule failed.
	Injected(op Op) int
	// Inner is the wrapped FS.
	Inner() fsys.FS
}

// faultFS is the FS over storage that is not fsys.Relaxed.
type faultFS struct {
	inner fsys.FS

	mu       sync.Mutex
	rules    []*rule
	calls    [numOps]int
	injected [numOps]int
}

// relaxedFS is the FS over fsys.Relaxed storage: it is Relaxed too.
type relaxedFS struct {
	*faultFS
	r fsys.Relaxed
}

// New wraps inner with rules (more can be added with Add). The FS is an
// fsys.Relaxed if and only if inner is one.
func New(inner fsys.FS, rules ...Rule) FS {
	f := &faultFS{inner: inner}
	f.Add(rules...)
	if r, ok := inner.(fsys.Relaxed); ok {
		return &relaxedFS{faultFS: f, r: r}
	}
	return f
}

// Add implements FS.
func (f *faultFS) Add(rules ...Rule) {
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

// Clear implements FS.
func (f *faultFS) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// Calls implements FS.
func (f *faultFS) Calls(op Op) int { return f.count(&f.calls, op) }

// Injected implements FS.
func (f *faultFS) Injected(op Op) int { return f.count(&f.injected, op) }

func (f *faultFS) count(c *[numOps]int, op Op) int {
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

// Inner implements FS.
func (f *faultFS) Inner() fsys.FS { return f.inner }

// fault counts a call of op (exactly one bit) on name and returns the
// error to inject, if a rule says so.
func (f *faultFS) fault(op Op, name string) error {
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
			err = &InjectedError{Op: op, Name: name, Err: r.Err, Landed: r.Landed}
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
func (f *faultFS) CreateExclusive(ctx context.Context, name string, data []byte) error {
	return landed(f.fault(CreateExclusive, name), func() error { return f.inner.CreateExclusive(ctx, name, data) })
}

// landed runs call unless err (an injected error) fails it, and returns
// err after the call's success if err is one of Rule.Landed.
func landed(err error, call func() error) error {
	var ie *InjectedError
	if err == nil || errors.As(err, &ie) && ie.Landed {
		if cerr := call(); cerr != nil || err == nil {
			return cerr
		}
	}
	return err
}

// Create implements fsys.FS; the Writer's Write and Commit are subject to
// rules too.
func (f *faultFS) Create(ctx context.Context, name string) (fsys.Writer, error) {
	if err := f.fault(Create, name); err != nil {
		return nil, err
	}
	w, err := f.inner.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return f.wrap(name, w), nil
}

// wrap wraps a Writer of the inner FS: a DataSyncer if it is one.
func (f *faultFS) wrap(name string, w fsys.Writer) fsys.Writer {
	fw := &writer{f: f, name: name, w: w}
	if _, ok := w.(fsys.DataSyncer); ok {
		return &syncWriter{fw}
	}
	return fw
}

// ReadFile implements fsys.FS.
func (f *faultFS) ReadFile(ctx context.Context, name string) ([]byte, fsys.Token, error) {
	if err := f.fault(ReadFile, name); err != nil {
		return nil, "", err
	}
	return f.inner.ReadFile(ctx, name)
}

// Replace implements fsys.FS.
func (f *faultFS) Replace(ctx context.Context, name string, data []byte, ifMatch fsys.Token) error {
	if err := f.fault(Replace, name); err != nil {
		return err
	}
	return f.inner.Replace(ctx, name, data, ifMatch)
}

// Open implements fsys.FS; the File's Read and ReadAt are subject to
// rules too.
func (f *faultFS) Open(ctx context.Context, name string) (fsys.File, error) {
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
func (f *faultFS) Stat(ctx context.Context, name string) (fsys.Entry, error) {
	if err := f.fault(Stat, name); err != nil {
		return fsys.Entry{}, err
	}
	return f.inner.Stat(ctx, name)
}

// List implements fsys.FS.
func (f *faultFS) List(ctx context.Context, dir string) ([]fsys.Entry, error) {
	if err := f.fault(List, dir); err != nil {
		return nil, err
	}
	return f.inner.List(ctx, dir)
}

// Mkdir implements fsys.FS.
func (f *faultFS) Mkdir(ctx context.Context, name string) error {
	if err := f.fault(Mkdir, name); err != nil {
		return err
	}
	return f.inner.Mkdir(ctx, name)
}

// Delete implements fsys.FS.
func (f *faultFS) Delete(ctx context.Context, name string) error {
	if err := f.fault(Delete, name); err != nil {
		return err
	}
	return f.inner.Delete(ctx, name)
}

// DeleteAll implements fsys.FS.
func (f *faultFS) DeleteAll(ctx context.Context, dir string) error {
	if err := f.fault(DeleteAll, dir); err != nil {
		return err
	}
	return f.inner.DeleteAll(ctx, dir)
}

// CreateMarker implements fsys.Marker: a CreateExclusive for the rules,
// then the inner FS's CreateMarker where it has one (else what
// fsys.CreateMarker does without it).
func (f *faultFS) CreateMarker(ctx context.Context, name string) error {
	if err := f.fault(CreateExclusive, name); err != nil {
		return err
	}
	return fsys.CreateMarker(ctx, f.inner, name)
}

// StatPair implements fsys.PairStater: a Stat of dir and, if that one
// succeeds, a Stat of dir/name for the rules (as fsys.StatPair does them
// without a PairStater), through the inner FS's StatPair where it has one.
func (f *faultFS) StatPair(ctx context.Context, dir, name string) (d, e fsys.Entry, errName, err error) {
	if err := f.fault(Stat, dir); err != nil {
		return fsys.Entry{}, fsys.Entry{}, nil, err
	}
	d, e, errName, err = fsys.StatPair(ctx, f.inner, dir, name)
	if err != nil {
		return fsys.Entry{}, fsys.Entry{}, nil, err
	}
	if ferr := f.fault(Stat, path.Join(dir, name)); ferr != nil {
		return d, fsys.Entry{}, ferr, nil
	}
	return d, e, errName, nil
}

// CreateExclusiveSync implements fsys.Relaxed (a CreateExclusive for the
// rules).
func (f *relaxedFS) CreateExclusiveSync(ctx context.Context, name string, data []byte, sync fsys.Sync) error {
	return landed(f.fault(CreateExclusive, name), func() error { return f.r.CreateExclusiveSync(ctx, name, data, sync) })
}

// CreateSync implements fsys.Relaxed (a Create for the rules); the
// Writer is the same as Create's.
func (f *relaxedFS) CreateSync(ctx context.Context, name string, sync fsys.Sync) (fsys.Writer, error) {
	if err := f.fault(Create, name); err != nil {
		return nil, err
	}
	w, err := f.r.CreateSync(ctx, name, sync)
	if err != nil {
		return nil, err
	}
	return f.wrap(name, w), nil
}

// ReplaceSync implements fsys.Relaxed (a Replace for the rules).
func (f *relaxedFS) ReplaceSync(ctx context.Context, name string, data []byte, ifMatch fsys.Token, sync fsys.Sync) error {
	if err := f.fault(Replace, name); err != nil {
		return err
	}
	return f.r.ReplaceSync(ctx, name, data, ifMatch, sync)
}

// DeleteSync implements fsys.Relaxed (a Delete for the rules).
func (f *relaxedFS) DeleteSync(ctx context.Context, name string, sync fsys.Sync) error {
	if err := f.fault(Delete, name); err != nil {
		return err
	}
	return f.r.DeleteSync(ctx, name, sync)
}

// SyncDir implements fsys.Relaxed (a Sync of dir for the rules).
func (f *relaxedFS) SyncDir(ctx context.Context, dir string) error {
	if err := f.fault(Sync, dir); err != nil {
		return err
	}
	return f.r.SyncDir(ctx, dir)
}

// writer injects Write and Commit faults. Like a real disk's, a failed
// Write fails the Writer: its Commit fails too.
type writer struct {
	f    *faultFS
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
	var ie *InjectedError
	if err != nil && errors.As(err, &ie) && ie.Landed && w.err == nil {
		return landed(err, func() error { return w.w.Commit(ctx) })
	}
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

// syncWriter is a writer whose inner Writer is an fsys.DataSyncer.
type syncWriter struct{ *writer }

// Sync implements fsys.DataSyncer (a Sync for the rules). A failed Sync
// leaves the Writer as it was, its Commit free to succeed: that is what
// Linux does after a failed fsync, which reports a writeback error once
// (the next fsync may return nil although the data never reached the
// disk), so a caller must not go on to Commit after a failed Sync.
func (w *syncWriter) Sync(ctx context.Context) error {
	if err := w.f.fault(Sync, w.name); err != nil {
		return err
	}
	return w.w.(fsys.DataSyncer).Sync(ctx)
}

// file injects Read faults into Read and ReadAt.
type file struct {
	fsys.File
	f    *faultFS
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

var (
	_ FS              = (*faultFS)(nil)
	_ FS              = (*relaxedFS)(nil)
	_ fsys.Relaxed    = (*relaxedFS)(nil)
	_ fsys.DataSyncer = (*syncWriter)(nil)
)
