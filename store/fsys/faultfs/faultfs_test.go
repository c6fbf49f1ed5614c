package faultfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"testing"

	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/faultfs"
	"github.com/quiverdb/quiver/store/fsys/fsystest"
)

func newLocal(t *testing.T) *fsys.Local {
	t.Helper()
	l, err := fsys.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// strict hides the optional interfaces of the FS it embeds (fsys.Relaxed
// among them): storage that is durable at every call.
type strict struct{ fsys.FS }

// variants are the storages the conformance runs wrap: Local, which is
// fsys.Relaxed (so is the faultfs over it), and Local hidden behind
// strict, which is not.
var variants = []struct {
	name    string
	relaxed bool
	inner   func(t *testing.T) fsys.FS
}{
	{"Relaxed", true, func(t *testing.T) fsys.FS { return newLocal(t) }},
	{"Strict", false, func(t *testing.T) fsys.FS { return strict{newLocal(t)} }},
}

func TestConformance(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			fsystest.Run(t, func(t *testing.T) fsys.FS {
				f := faultfs.New(v.inner(t))
				if fsys.IsRelaxed(f) != v.relaxed {
					t.Fatalf("IsRelaxed = %v, want %v", !v.relaxed, v.relaxed)
				}
				return f
			})
		})
	}
}

// TestConformanceInertRules: rules that never fire change nothing.
func TestConformanceInertRules(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			fsystest.Run(t, func(t *testing.T) fsys.FS {
				return faultfs.New(v.inner(t),
					faultfs.Rule{Op: faultfs.All, Glob: "no-such-name", Err: syscall.EIO},
					faultfs.Rule{Op: faultfs.Writes, Err: syscall.ENOSPC, After: 1 << 30},
				)
			})
		})
	}
}

// TestOptionalInterfaces: faultfs is fsys.Relaxed, and its Writers
// fsys.DataSyncers, exactly when what it wraps is (nested too).
func TestOptionalInterfaces(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name    string
		f       fsys.FS
		relaxed bool
	}{
		{"local", faultfs.New(newLocal(t)), true},
		{"faultfs over local", faultfs.New(faultfs.New(newLocal(t))), true},
		{"strict", faultfs.New(strict{newLocal(t)}), false},
		{"faultfs over strict", faultfs.New(faultfs.New(strict{newLocal(t)})), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fsys.IsRelaxed(tc.f); got != tc.relaxed {
				t.Errorf("IsRelaxed = %v, want %v", got, tc.relaxed)
			}
			w, err := tc.f.Create(ctx, "w")
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			// strict hides the FS's interfaces, not its Writers'.
			if _, ok := w.(fsys.DataSyncer); !ok {
				t.Errorf("the Writer of Local is no DataSyncer through faultfs")
			}
		})
	}
	w, err := faultfs.New(plainWriters{strict{newLocal(t)}}).Create(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if _, ok := w.(fsys.DataSyncer); ok {
		t.Errorf("a Writer that was no DataSyncer is one through faultfs")
	}
}

// plainWriters hides the optional interfaces of its Writers.
type plainWriters struct{ fsys.FS }

func (p plainWriters) Create(ctx context.Context, name string) (fsys.Writer, error) {
	w, err := p.FS.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return struct{ fsys.Writer }{w}, nil
}

var errCustom = errors.New("custom failure")

// TestEachOp fails each operation in turn and checks that the error is
// the injected one, that the call had no effect, and the counters.
func TestEachOp(t *testing.T) {
	ctx := t.Context()
	relaxed := func(f fsys.FS) fsys.Relaxed { return f.(fsys.Relaxed) }
	ops := []struct {
		name string // the method called, when it is not op's
		op   faultfs.Op
		// call performs the operation on f (set up by setup) and
		// returns its error.
		call func(f fsys.FS) error
		// unchanged checks that the failed call had no effect.
		unchanged func(t *testing.T, f fsys.FS)
	}{
		{"", faultfs.CreateExclusive, func(f fsys.FS) error { return f.CreateExclusive(ctx, "d/new", []byte("x")) }, absent("d/new")},
		{"", faultfs.Create, func(f fsys.FS) error {
			w, err := f.Create(ctx, "d/new")
			if err == nil {
				w.Abort()
			}
			return err
		}, absent("d/new")},
		{"", faultfs.Write, func(f fsys.FS) error { return stream(ctx, f, "d/new", []byte("x")) }, absent("d/new")},
		{"", faultfs.Commit, func(f fsys.FS) error { return stream(ctx, f, "d/new", []byte("x")) }, absent("d/new")},
		{"", faultfs.ReadFile, func(f fsys.FS) error { _, _, err := f.ReadFile(ctx, "d/obj"); return err }, content("d/obj", "obj")},
		{"", faultfs.Replace, func(f fsys.FS) error {
			_, tok, err := f.ReadFile(ctx, "d/obj")
			if err != nil {
				return err
			}
			return f.Replace(ctx, "d/obj", []byte("changed"), tok)
		}, content("d/obj", "obj")},
		{"", faultfs.Open, func(f fsys.FS) error {
			r, err := f.Open(ctx, "d/obj")
			if err == nil {
				r.Close()
			}
			return err
		}, nil},
		{"", faultfs.Read, func(f fsys.FS) error {
			r, err := f.Open(ctx, "d/obj")
			if err != nil {
				return err
			}
			defer r.Close()
			if _, err := r.ReadAt(make([]byte, 1), 0); err != nil {
				return err
			}
			_, err = io.ReadAll(r)
			return err
		}, nil},
		{"", faultfs.Stat, func(f fsys.FS) error { _, err := f.Stat(ctx, "d/obj"); return err }, nil},
		{"", faultfs.List, func(f fsys.FS) error { _, err := f.List(ctx, "d"); return err }, nil},
		{"", faultfs.Mkdir, func(f fsys.FS) error { return f.Mkdir(ctx, "d/newdir") }, absent("d/newdir")},
		{"", faultfs.Delete, func(f fsys.FS) error { return f.Delete(ctx, "d/obj") }, content("d/obj", "obj")},
		{"", faultfs.DeleteAll, func(f fsys.FS) error { return f.DeleteAll(ctx, "d") }, content("d/obj", "obj")},
		// The optional interfaces, failed as the operation they count as.
		{"CreateExclusiveSync", faultfs.CreateExclusive, func(f fsys.FS) error {
			return relaxed(f).CreateExclusiveSync(ctx, "d/new", []byte("x"), fsys.SyncContent)
		}, absent("d/new")},
		{"CreateMarker", faultfs.CreateExclusive, func(f fsys.FS) error {
			return f.(fsys.Marker).CreateMarker(ctx, "d/new")
		}, absent("d/new")},
		{"CreateSync", faultfs.Create, func(f fsys.FS) error {
			w, err := relaxed(f).CreateSync(ctx, "d/new", fsys.SyncNone)
			if err == nil {
				w.Abort()
			}
			return err
		}, absent("d/new")},
		{"CreateSync.Write", faultfs.Write, func(f fsys.FS) error { return streamSync(ctx, f, "d/new", []byte("x"), false) }, absent("d/new")},
		{"CreateSync.Commit", faultfs.Commit, func(f fsys.FS) error { return streamSync(ctx, f, "d/new", []byte("x"), false) }, absent("d/new")},
		{"DataSyncer.Sync", faultfs.Sync, func(f fsys.FS) error { return streamSync(ctx, f, "d/new", []byte("x"), true) }, absent("d/new")},
		{"ReplaceSync", faultfs.Replace, func(f fsys.FS) error {
			_, tok, err := f.ReadFile(ctx, "d/obj")
			if err != nil {
				return err
			}
			return relaxed(f).ReplaceSync(ctx, "d/obj", []byte("changed"), tok, fsys.SyncContent)
		}, content("d/obj", "obj")},
		{"DeleteSync", faultfs.Delete, func(f fsys.FS) error {
			return relaxed(f).DeleteSync(ctx, "d/obj", fsys.SyncNone)
		}, content("d/obj", "obj")},
		{"SyncDir", faultfs.Sync, func(f fsys.FS) error { return relaxed(f).SyncDir(ctx, "d") }, content("d/obj", "obj")},
		{"StatPair", faultfs.Stat, func(f fsys.FS) error {
			_, _, errName, err := f.(fsys.PairStater).StatPair(ctx, "d", "obj")
			if err == nil {
				err = errName
			}
			return err
		}, nil},
	}
	for _, o := range ops {
		for _, injected := range []error{syscall.ENOSPC, syscall.EIO, errCustom} {
			name := o.name
			if name == "" {
				name = o.op.String()
			}
			t.Run(fmt.Sprintf("%s/%v", name, injected), func(t *testing.T) {
				local := newLocal(t)
				if err := local.CreateExclusive(ctx, "d/obj", []byte("obj")); err != nil {
					t.Fatal(err)
				}
				f := faultfs.New(local, faultfs.Rule{Op: o.op, Err: injected})
				err := o.call(f)
				if !errors.Is(err, injected) {
					t.Fatalf("err = %v, want %v", err, injected)
				}
				var ie *faultfs.InjectedError
				if !errors.As(err, &ie) || ie.Op != o.op {
					t.Errorf("err = %#v, want an *InjectedError for %v", err, o.op)
				}
				if got := f.Injected(faultfs.All); got != 1 {
					t.Errorf("Injected(All) = %d, want 1", got)
				}
				if got := f.Injected(o.op); got != 1 {
					t.Errorf("Injected(%v) = %d, want 1", o.op, got)
				}
				if got := f.Calls(o.op); got < 1 {
					t.Errorf("Calls(%v) = %d, want ≥ 1", o.op, got)
				}
				if o.unchanged != nil {
					o.unchanged(t, local)
				}
				if n := temps(t, local, "d"); n != 0 {
					t.Errorf("%d hidden temps left", n)
				}
				// Cleared, the same call works.
				f.Clear()
				if err := o.call(f); err != nil {
					t.Errorf("after Clear: %v", err)
				}
			})
		}
	}
}

func stream(ctx context.Context, f fsys.FS, name string, data []byte) error {
	w, err := f.Create(ctx, name)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	if err := w.Commit(ctx); err != nil {
		w.Abort()
		return err
	}
	return nil
}

// streamSync writes data to name through CreateSync (SyncContent), with
// a DataSyncer's Sync before the Commit if sync is set.
func streamSync(ctx context.Context, f fsys.FS, name string, data []byte, sync bool) error {
	w, err := f.(fsys.Relaxed).CreateSync(ctx, name, fsys.SyncContent)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	if sync {
		if err := w.(fsys.DataSyncer).Sync(ctx); err != nil {
			w.Abort()
			return err
		}
	}
	if err := w.Commit(ctx); err != nil {
		w.Abort()
		return err
	}
	return nil
}

func absent(name string) func(t *testing.T, f fsys.FS) {
	return func(t *testing.T, f fsys.FS) {
		t.Helper()
		if _, err := f.Stat(t.Context(), name); !errors.Is(err, fsys.ErrNotExist) {
			t.Errorf("Stat(%q): %v, want ErrNotExist", name, err)
		}
	}
}

func content(name, want string) func(t *testing.T, f fsys.FS) {
	return func(t *testing.T, f fsys.FS) {
		t.Helper()
		got, _, err := f.ReadFile(t.Context(), name)
		if err != nil || string(got) != want {
			t.Errorf("ReadFile(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
}

func temps(t *testing.T, f fsys.FS, dir string) int {
	t.Helper()
	entries, err := f.List(t.Context(), dir)
	if err != nil {
		t.Fatalf("List(%q): %v", dir, err)
	}
	n := 0
	for _, e := range entries {
		if fsys.IsTemp(e.Name) {
			n++
		}
	}
	return n
}

func TestAfterAndNth(t *testing.T) {
	tests := []struct {
		name      string
		rule      faultfs.Rule
		wantFails []bool // per call
	}{
		{"always", faultfs.Rule{}, []bool{true, true, true, true}},
		{"after 2", faultfs.Rule{After: 2}, []bool{false, false, true, true, true}},
		{"only the 3rd", faultfs.Rule{Nth: 3}, []bool{false, false, true, false, false}},
		{"only the 1st", faultfs.Rule{Nth: 1}, []bool{true, false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.rule.Op, tc.rule.Err = faultfs.CreateExclusive, syscall.ENOSPC
			f := faultfs.New(newLocal(t), tc.rule)
			for i, wantFail := range tc.wantFails {
				err := f.CreateExclusive(t.Context(), fmt.Sprintf("obj%d", i), nil)
				if failed := errors.Is(err, syscall.ENOSPC); failed != wantFail || !failed && err != nil {
					t.Errorf("call %d: err = %v, want failure %v", i+1, err, wantFail)
				}
			}
		})
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		glob string
		name string
		want bool
	}{
		{"", "a/b/c.parquet", true},
		{"*.parquet", "a/b/c.parquet", true},
		{"*.parquet", "c.parquet", true},
		{"*.parquet", "a/b/c.json", false},
		{"v*/*.parquet", "v1/c.parquet", true},
		{"v*/*.parquet", "p/v1/c.parquet", false},
		{"manifest", "p/manifest", true},
		{"p/manifest", "q/manifest", false},
	}
	for _, tc := range tests {
		t.Run(tc.glob+"~"+tc.name, func(t *testing.T) {
			f := faultfs.New(newLocal(t), faultfs.Rule{Op: faultfs.Stat, Glob: tc.glob, Err: errCustom})
			_, err := f.Stat(t.Context(), tc.name)
			if got := errors.Is(err, errCustom); got != tc.want {
				t.Errorf("Stat(%q) with glob %q: %v, want injected %v", tc.name, tc.glob, err, tc.want)
			}
		})
	}
}

// TestDiskFull flips a disk full and back at run time: writes fail, reads
// go on, and nothing half-written is left.
func TestDiskFull(t *testing.T) {
	ctx := t.Context()
	f := faultfs.New(newLocal(t))
	if err := f.CreateExclusive(ctx, "p/a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	w, err := f.Create(ctx, "p/big")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("first part")); err != nil {
		t.Fatal(err)
	}

	f.Add(faultfs.Rule{Op: faultfs.Writes, Err: syscall.ENOSPC})
	if _, err := w.Write([]byte("second part")); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Write on a full disk: %v", err)
	}
	if err := w.Commit(ctx); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Commit after a failed Write: %v", err)
	}
	w.Abort()
	if err := f.CreateExclusive(ctx, "p/b", []byte("b")); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("CreateExclusive on a full disk: %v", err)
	}
	if err := f.Mkdir(ctx, "q"); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Mkdir on a full disk: %v", err)
	}
	if got, _, err := f.ReadFile(ctx, "p/a"); err != nil || string(got) != "a" {
		t.Errorf("ReadFile on a full disk = %q, %v", got, err)
	}
	if err := f.Delete(ctx, "p/a"); err != nil {
		t.Errorf("Delete on a full disk: %v", err)
	}

	f.Clear()
	if err := f.CreateExclusive(ctx, "p/b", []byte("b")); err != nil {
		t.Errorf("CreateExclusive after the disk was freed: %v", err)
	}
	entries, err := f.List(ctx, "p")
	if err != nil || len(entries) != 1 || entries[0].Name != "b" {
		t.Errorf("List(p) = %+v, %v; want [b] alone", entries, err)
	}
	if got := f.Injected(faultfs.Writes); got != 4 {
		t.Errorf("Injected(Writes) = %d, want 4 (Write, Commit, CreateExclusive, Mkdir)", got)
	}
	if got := f.Calls(faultfs.CreateExclusive); got != 3 {
		t.Errorf("Calls(CreateExclusive) = %d, want 3", got)
	}
}

// TestConcurrentRules adds and clears rules while goroutines work (run
// with -race).
func TestConcurrentRules(t *testing.T) {
	ctx := t.Context()
	f := faultfs.New(newLocal(t))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				name := fmt.Sprintf("g%d/%d", g, i)
				err := f.CreateExclusive(ctx, name, []byte(name))
				if err != nil && !errors.Is(err, syscall.ENOSPC) {
					t.Errorf("CreateExclusive: %v", err)
				}
				if err == nil {
					got, _, err := f.ReadFile(ctx, name)
					if err != nil && !errors.Is(err, syscall.EIO) || err == nil && !bytes.Equal(got, []byte(name)) {
						t.Errorf("ReadFile = %q, %v", got, err)
					}
				}
			}
		})
	}
	for range 50 {
		f.Add(faultfs.Rule{Op: faultfs.Writes, Err: syscall.ENOSPC}, faultfs.Rule{Op: faultfs.ReadFile, Err: syscall.EIO, Nth: 2})
		f.Clear()
	}
	wg.Wait()
	if got := f.Calls(faultfs.CreateExclusive); got != 200 {
		t.Errorf("Calls(CreateExclusive) = %d, want 200", got)
	}
}

func TestAddRejectsInertRules(t *testing.T) {
	for _, r := range []faultfs.Rule{
		{Err: syscall.EIO},
		{Op: faultfs.Stat},
		{Op: faultfs.Stat, Err: syscall.EIO, Glob: "[unclosed"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Add(%+v) did not panic", r)
				}
			}()
			faultfs.New(newLocal(t), r)
		}()
	}
}

func TestOpString(t *testing.T) {
	if got := (faultfs.Write | faultfs.Commit).String(); got != "Write|Commit" {
		t.Errorf("String = %q", got)
	}
	if got := faultfs.DeleteAll.String(); got != "DeleteAll" {
		t.Errorf("String = %q", got)
	}
}

// TestStatPairName: a rule on the name fails StatPair's name, not the
// directory, as it fails the second of fsys.StatPair's two Stats.
func TestStatPairName(t *testing.T) {
	ctx := t.Context()
	local := newLocal(t)
	if err := local.CreateExclusive(ctx, "d/obj", []byte("obj")); err != nil {
		t.Fatal(err)
	}
	f := faultfs.New(local, faultfs.Rule{Op: faultfs.Stat, Glob: "d/obj", Err: syscall.EIO})
	d, _, errName, err := f.StatPair(ctx, "d", "obj")
	if err != nil || !d.Dir || !errors.Is(errName, syscall.EIO) {
		t.Errorf("StatPair = %+v, %v, %v; want the directory and an injected EIO", d, errName, err)
	}
	if got := f.Calls(faultfs.Stat); got != 2 {
		t.Errorf("Calls(Stat) = %d, want 2", got)
	}
	if _, _, _, err := f.StatPair(ctx, "nodir", "obj"); !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("StatPair(nodir): %v", err)
	}
	if got := f.Calls(faultfs.Stat); got != 3 {
		t.Errorf("Calls(Stat) = %d, want 3 (a missing directory's name is not stated)", got)
	}
}

// TestFailedSyncLeavesWriter: a failed Sync does not fail the Writer (a
// failed fsync on Linux does not either): its Commit succeeds, which is
// why a caller must not Commit after a failed Sync.
func TestFailedSyncLeavesWriter(t *testing.T) {
	ctx := t.Context()
	f := faultfs.New(newLocal(t), faultfs.Rule{Op: faultfs.Writes, Err: syscall.ENOSPC, Nth: 3})
	if err := streamSync(ctx, f, "obj", []byte("x"), true); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the Sync (the 3rd write: Create, Write, Sync): %v", err)
	}
	if got := f.Injected(faultfs.Sync); got != 1 {
		t.Errorf("Injected(Sync) = %d, want 1", got)
	}
	w, err := f.Create(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.(fsys.DataSyncer).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	f.Add(faultfs.Rule{Op: faultfs.Sync, Err: syscall.EIO})
	if err := w.(fsys.DataSyncer).Sync(ctx); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync: %v", err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Errorf("Commit after a failed Sync: %v, want nil", err)
	}
}
