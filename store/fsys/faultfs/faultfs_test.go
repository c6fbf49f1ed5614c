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

func TestConformance(t *testing.T) {
	fsystest.Run(t, func(t *testing.T) fsys.FS { return faultfs.New(newLocal(t)) })
}

// TestConformanceInertRules: rules that never fire change nothing.
func TestConformanceInertRules(t *testing.T) {
	fsystest.Run(t, func(t *testing.T) fsys.FS {
		return faultfs.New(newLocal(t),
			faultfs.Rule{Op: faultfs.All, Glob: "no-such-name", Err: syscall.EIO},
			faultfs.Rule{Op: faultfs.Writes, Err: syscall.ENOSPC, After: 1 << 30},
		)
	})
}

var errCustom = errors.New("custom failure")

// TestEachOp fails each operation in turn and checks that the error is
// the injected one, that the call had no effect, and the counters.
func TestEachOp(t *testing.T) {
	ctx := t.Context()
	ops := []struct {
		op faultfs.Op
		// call performs the operation on f (set up by setup) and
		// returns its error.
		call func(f fsys.FS) error
		// unchanged checks that the failed call had no effect.
		unchanged func(t *testing.T, f fsys.FS)
	}{
		{faultfs.CreateExclusive, func(f fsys.FS) error { return f.CreateExclusive(ctx, "d/new", []byte("x")) }, absent("d/new")},
		{faultfs.Create, func(f fsys.FS) error {
			w, err := f.Create(ctx, "d/new")
			if err == nil {
				w.Abort()
			}
			return err
		}, absent("d/new")},
		{faultfs.Write, func(f fsys.FS) error { return stream(ctx, f, "d/new", []byte("x")) }, absent("d/new")},
		{faultfs.Commit, func(f fsys.FS) error { return stream(ctx, f, "d/new", []byte("x")) }, absent("d/new")},
		{faultfs.ReadFile, func(f fsys.FS) error { _, _, err := f.ReadFile(ctx, "d/obj"); return err }, content("d/obj", "obj")},
		{faultfs.Replace, func(f fsys.FS) error {
			_, tok, err := f.ReadFile(ctx, "d/obj")
			if err != nil {
				return err
			}
			return f.Replace(ctx, "d/obj", []byte("changed"), tok)
		}, content("d/obj", "obj")},
		{faultfs.Open, func(f fsys.FS) error {
			r, err := f.Open(ctx, "d/obj")
			if err == nil {
				r.Close()
			}
			return err
		}, nil},
		{faultfs.Read, func(f fsys.FS) error {
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
		{faultfs.Stat, func(f fsys.FS) error { _, err := f.Stat(ctx, "d/obj"); return err }, nil},
		{faultfs.List, func(f fsys.FS) error { _, err := f.List(ctx, "d"); return err }, nil},
		{faultfs.Mkdir, func(f fsys.FS) error { return f.Mkdir(ctx, "d/newdir") }, absent("d/newdir")},
		{faultfs.Delete, func(f fsys.FS) error { return f.Delete(ctx, "d/obj") }, content("d/obj", "obj")},
		{faultfs.DeleteAll, func(f fsys.FS) error { return f.DeleteAll(ctx, "d") }, content("d/obj", "obj")},
	}
	for _, o := range ops {
		for _, injected := range []error{syscall.ENOSPC, syscall.EIO, errCustom} {
			t.Run(fmt.Sprintf("%v/%v", o.op, injected), func(t *testing.T) {
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
