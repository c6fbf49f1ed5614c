package crashfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/crashfs"
	"github.com/quiverdb/quiver/store/fsys/fsystest"
)

func newFS(t *testing.T, opts crashfs.Options) *crashfs.FS {
	t.Helper()
	l, err := fsys.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f, err := crashfs.New(t.Context(), l, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestConformance: crashfs over fsys.Local is a faithful FS.
func TestConformance(t *testing.T) {
	fsystest.Run(t, func(t *testing.T) fsys.FS { return newFS(t, crashfs.Options{}) })
}

// absent marks a name the crash image must not hold.
var absent = []byte("<absent>")

// step is one call on the FS.
type step func(ctx context.Context, f *crashfs.FS) error

func create(name, data string, sync fsys.Sync) step {
	return func(ctx context.Context, f *crashfs.FS) error {
		return fsys.CreateExclusiveSync(ctx, f, name, []byte(data), sync)
	}
}

func syncDir(dir string) step {
	return func(ctx context.Context, f *crashfs.FS) error { return fsys.SyncDir(ctx, f, dir) }
}

func replace(name, old, data string, sync fsys.Sync) step {
	return func(ctx context.Context, f *crashfs.FS) error {
		b, tok, err := f.ReadFile(ctx, name)
		if err != nil {
			return err
		}
		if string(b) != old {
			return fmt.Errorf("%s holds %q, want %q", name, b, old)
		}
		return fsys.ReplaceSync(ctx, f, name, []byte(data), tok, sync)
	}
}

func del(name string, sync fsys.Sync) step {
	return func(ctx context.Context, f *crashfs.FS) error { return fsys.DeleteSync(ctx, f, name, sync) }
}

func marker(name string) step {
	return func(ctx context.Context, f *crashfs.FS) error { return fsys.CreateMarker(ctx, f, name) }
}

func mkdir(name string) step {
	return func(ctx context.Context, f *crashfs.FS) error { return f.Mkdir(ctx, name) }
}

// write streams parts into name through a Writer of sync, calling
// DataSyncer.Sync after each part whose index is in syncAfter; commit
// false leaves the Writer open (its temp in the directory).
func write(name string, sync fsys.Sync, parts []string, syncAfter []int, commit bool) step {
	return func(ctx context.Context, f *crashfs.FS) error {
		w, err := fsys.CreateSync(ctx, f, name, sync)
		if err != nil {
			return err
		}
		for i, p := range parts {
			if _, err := w.Write([]byte(p)); err != nil {
				return err
			}
			for _, k := range syncAfter {
				if k == i {
					if err := w.(fsys.DataSyncer).Sync(ctx); err != nil {
						return err
					}
				}
			}
		}
		if !commit {
			return nil
		}
		return w.Commit(ctx)
	}
}

// TestCrashRules: each rule of the model, as the image after the steps
// shows it.
func TestCrashRules(t *testing.T) {
	full, content, none := fsys.SyncFull, fsys.SyncContent, fsys.SyncNone
	tests := []struct {
		name  string
		tear  crashfs.Tear
		steps []step
		want  map[string][]byte // name → content, or absent
		temps int               // hidden temps the image holds (in any directory)
	}{
		{name: "SyncFull create survives", steps: []step{create("a/f", "data", full)},
			want: map[string][]byte{"a/f": []byte("data")}},
		{name: "SyncContent create lost without SyncDir", steps: []step{create("a/f", "data", content)},
			want: map[string][]byte{"a/f": absent}},
		{name: "SyncContent create whole after SyncDir", steps: []step{create("a/f", "data", content), syncDir("a")},
			want: map[string][]byte{"a/f": []byte("data")}},
		{name: "SyncDir of another directory does not help", steps: []step{create("a/f", "data", content), create("b/g", "x", full), syncDir("b"), syncDir("")},
			want: map[string][]byte{"a/f": absent, "b/g": []byte("x")}},
		{name: "SyncNone create after SyncDir is empty", steps: []step{create("a/lock", "owner", none), syncDir("a")},
			want: map[string][]byte{"a/lock": {}}},
		{name: "SyncNone create kept whole with TearKeep", tear: crashfs.TearKeep, steps: []step{create("a/lock", "owner", none), syncDir("a")},
			want: map[string][]byte{"a/lock": []byte("owner")}},
		{name: "another SyncFull call syncs the whole directory", steps: []step{create("a/f", "data", content), create("a/g", "x", full)},
			want: map[string][]byte{"a/f": []byte("data"), "a/g": []byte("x")}},
		{name: "new directories are synced into their parents", steps: []step{create("a/b/c/f", "data", content), syncDir("a/b/c")},
			want: map[string][]byte{"a/b/c/f": []byte("data")}},
		{name: "a file in a new directory is lost without its SyncDir", steps: []step{create("a/b/c/f", "data", content), syncDir("a/b")},
			want: map[string][]byte{"a/b/c/f": absent, "a/b/c": nil}},
		{name: "Mkdir is durable", steps: []step{mkdir("x/v0")},
			want: map[string][]byte{"x/v0": nil}},
		{name: "Replace keeps the old content until SyncDir", steps: []step{create("a/m", "old", full), replace("a/m", "old", "new", content)},
			want: map[string][]byte{"a/m": []byte("old")}},
		{name: "Replace after SyncDir", steps: []step{create("a/m", "old", full), replace("a/m", "old", "new", content), syncDir("a")},
			want: map[string][]byte{"a/m": []byte("new")}},
		{name: "Replace SyncFull", steps: []step{create("a/m", "old", full), replace("a/m", "old", "new", full)},
			want: map[string][]byte{"a/m": []byte("new")}},
		{name: "Replace SyncNone then SyncDir leaves an empty object", steps: []step{create("a/m", "old", full), replace("a/m", "old", "new", none), syncDir("a")},
			want: map[string][]byte{"a/m": {}}},
		{name: "Delete undone by a crash", steps: []step{create("a/f", "data", full), del("a/f", none)},
			want: map[string][]byte{"a/f": []byte("data")}},
		{name: "Delete after SyncDir", steps: []step{create("a/f", "data", full), del("a/f", content), syncDir("a")},
			want: map[string][]byte{"a/f": absent}},
		{name: "Delete SyncFull", steps: []step{create("a/f", "data", full), del("a/f", full)},
			want: map[string][]byte{"a/f": absent}},
		{name: "a lock created and released unsynced leaves nothing", steps: []step{create("a/keep", "k", full), create("a/lock", "me", none), del("a/lock", none)},
			want: map[string][]byte{"a/lock": absent, "a/keep": []byte("k")}},
		{name: "a lock made durable by a sync while held comes back empty", steps: []step{create("a/lock", "me", none), create("a/m", "x", full), del("a/lock", none)},
			want: map[string][]byte{"a/lock": {}, "a/m": []byte("x")}},
		{name: "marker lost without SyncDir", steps: []step{create("v/keep", "", full), marker("v/.1.claim")},
			want: map[string][]byte{"v/.1.claim": absent, "v/keep": {}}},
		{name: "marker after SyncDir", steps: []step{marker("v/.1.claim"), syncDir("v")},
			want: map[string][]byte{"v/.1.claim": {}}},
		{name: "SyncContent Writer lost without SyncDir", steps: []step{write("v/1.parquet", content, []string{"ab", "cd"}, nil, true)},
			want: map[string][]byte{"v/1.parquet": absent}},
		{name: "SyncContent Writer whole after SyncDir", steps: []step{write("v/1.parquet", content, []string{"ab", "cd"}, nil, true), syncDir("v")},
			want: map[string][]byte{"v/1.parquet": []byte("abcd")}},
		{name: "SyncFull Writer", steps: []step{write("v/1.parquet", full, []string{"ab", "cd"}, nil, true)},
			want: map[string][]byte{"v/1.parquet": []byte("abcd")}},
		{name: "SyncNone Writer keeps what DataSyncer.Sync synced", steps: []step{write("v/1.parquet", none, []string{"ab", "cd"}, []int{0}, true), syncDir("v")},
			want: map[string][]byte{"v/1.parquet": []byte("ab")}},
		{name: "SyncNone Writer unsynced is empty", steps: []step{write("v/1.parquet", none, []string{"ab", "cd"}, nil, true), syncDir("v")},
			want: map[string][]byte{"v/1.parquet": {}}},
		{name: "an open Writer's temp is kept by a SyncDir", steps: []step{write("v/1.parquet", content, []string{"ab", "cd"}, []int{0}, false), syncDir("v")},
			want: map[string][]byte{"v/1.parquet": absent}, temps: 1},
		{name: "an open Writer's temp is gone without one", steps: []step{write("v/1.parquet", content, []string{"ab"}, nil, false)},
			want: map[string][]byte{"v/1.parquet": absent}},
		{name: "DeleteAll is durable", steps: []step{create("a/b/f", "x", full), syncDir("a/b"), func(ctx context.Context, f *crashfs.FS) error { return f.DeleteAll(ctx, "a") }},
			want: map[string][]byte{"a": absent}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			f := newFS(t, crashfs.Options{Tear: tc.tear})
			for i, s := range tc.steps {
				if err := s(ctx, f); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			if err := f.Check(ctx); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "image")
			img, err := f.Crash(dir)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				p := filepath.Join(dir, filepath.FromSlash(name))
				st, err := os.Stat(p)
				switch {
				case bytes.Equal(want, absent):
					if err == nil {
						t.Errorf("%s survived the crash", name)
					}
				case err != nil:
					t.Errorf("%s lost in the crash: %v", name, err)
				case want == nil:
					if !st.IsDir() {
						t.Errorf("%s is not a directory", name)
					}
				default:
					if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
						t.Errorf("%s after the crash holds %q (%v), want %q", name, got, err, want)
					}
				}
			}
			if got := countTemps(t, dir); got != tc.temps {
				t.Errorf("the image holds %d temps, want %d", got, tc.temps)
			}
			// The image opens as a data directory.
			l, err := fsys.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			l.Close()
			t.Logf("image: %+v", *img)
		})
	}
}

func countTemps(t *testing.T, dir string) int {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && fsys.IsTemp(d.Name()) {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTearPrefix: a torn file holds its synced bytes and a prefix of the
// rest.
func TestTearPrefix(t *testing.T) {
	ctx := t.Context()
	for seed := range uint64(20) {
		f := newFS(t, crashfs.Options{Tear: crashfs.TearPrefix, Seed: seed})
		if err := write("v/f", fsys.SyncNone, []string{"synced-", "not synced at all"}, []int{0}, true)(ctx, f); err != nil {
			t.Fatal(err)
		}
		if err := f.SyncDir(ctx, "v"); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "image")
		if _, err := f.Crash(dir); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "v", "f"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix("synced-not synced at all", string(got)) || len(got) < len("synced-") {
			t.Errorf("seed %d: torn file holds %q", seed, got)
		}
	}
}

// TestExistingContentIsDurable: what the storage held before New is
// durable.
func TestExistingContentIsDurable(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "p", "v0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "p", "v0", "0.parquet"), []byte("rows"), 0o444); err != nil {
		t.Fatal(err)
	}
	l, err := fsys.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := crashfs.New(ctx, l, crashfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(ctx, "p/v0/0.parquet"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.DeleteSync(ctx, f, "p/v0", fsys.SyncNone); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "image")
	img, err := f.Crash(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "p", "v0")); err != nil {
		t.Errorf("an unsynced removal of a directory survived the crash: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "p", "v0", "0.parquet")); err == nil {
		t.Errorf("a synced removal did not survive the crash")
	}
	if img.Revived != 1 {
		t.Errorf("image %+v: want one revived name", *img)
	}
}

// TestModelFollowsStorage: after a random mix of calls from several
// goroutines (crashes taken meanwhile), the model's current tree is the
// storage's, and a final crash after syncing every directory loses
// nothing.
func TestModelFollowsStorage(t *testing.T) {
	ctx := t.Context()
	f := newFS(t, crashfs.Options{Tear: crashfs.TearMixed, Seed: 1})
	var wg sync.WaitGroup
	syncs := []fsys.Sync{fsys.SyncFull, fsys.SyncContent, fsys.SyncNone}
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 60 {
				dir := fmt.Sprintf("d%d/e%d", rng.IntN(3), rng.IntN(2))
				name := path.Join(dir, fmt.Sprintf("g%d-%d", g, i))
				sync := syncs[rng.IntN(3)]
				var err error
				switch rng.IntN(7) {
				case 0, 1:
					err = fsys.CreateExclusiveSync(ctx, f, name, []byte(name), sync)
				case 2:
					err = write(name, sync, []string{name, "+", name}, []int{rng.IntN(3)}, rng.IntN(4) > 0)(ctx, f)
				case 3:
					err = fsys.CreateMarker(ctx, f, name+".claim")
				case 4:
					err = fsys.SyncDir(ctx, f, dir)
					if errors.Is(err, fs.ErrNotExist) {
						err = nil
					}
				case 5:
					if err = fsys.CreateExclusiveSync(ctx, f, name, []byte("x"), sync); err == nil {
						err = fsys.DeleteSync(ctx, f, name, syncs[rng.IntN(3)])
					}
				case 6:
					if i%10 == 0 {
						_, err = f.Crash(filepath.Join(t.TempDir(), "image"))
					}
				}
				if err != nil {
					t.Errorf("goroutine %d, call %d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := f.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// Sync every directory, deepest first: the image then holds the
	// storage's tree exactly (temps of open Writers aside).
	var dirs []string
	var walk func(dir string)
	walk = func(dir string) {
		dirs = append(dirs, dir)
		es, _ := f.List(ctx, dir)
		for _, e := range es {
			if e.Dir {
				walk(path.Join(dir, e.Name))
			}
		}
	}
	walk("")
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		if err := f.SyncDir(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "image")
	img, err := f.Crash(dir)
	if err != nil {
		t.Fatal(err)
	}
	if img.Lost != 0 || img.Revived != 0 {
		t.Errorf("after syncing every directory the image lost %d names and revived %d: %v", img.Lost, img.Revived, img.LostNames)
	}
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	again, err := crashfs.New(ctx, l, crashfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Every name of the storage (temps aside) is in the image.
	var count func(f fsys.FS, dir string) int
	count = func(fs fsys.FS, dir string) int {
		es, _ := fs.List(ctx, dir)
		n := 0
		for _, e := range es {
			if fsys.IsTemp(e.Name) {
				continue
			}
			n++
			if e.Dir {
				n += count(fs, path.Join(dir, e.Name))
			}
		}
		return n
	}
	if a, b := count(f, ""), count(again, ""); a != b {
		t.Errorf("the storage holds %d names, the image %d", a, b)
	}
	t.Logf("final image: %+v", *img)
}
