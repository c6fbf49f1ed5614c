package fsys_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/fsystest"
)

// newLocal returns a Local on a fresh directory, closed at the end of t.
func newLocal(t testing.TB, walk bool) *fsys.Local {
	t.Helper()
	open := fsys.NewLocal
	if walk {
		open = fsys.NewLocalWalk
	}
	l, err := open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

func TestLocalConformance(t *testing.T) {
	fsystest.Run(t, func(t *testing.T) fsys.FS {
		l := newLocal(t, false)
		if !l.UsesOpenat2() {
			t.Log("openat2 unavailable: this run covers the per-component walk")
		}
		return l
	})
}

func TestLocalWalkConformance(t *testing.T) {
	fsystest.Run(t, func(t *testing.T) fsys.FS { return newLocal(t, true) })
}

// TestErrorsNameNoAbsolutePath: every error names objects relative to the
// root and never carries the root's absolute path.
func TestErrorsNameNoAbsolutePath(t *testing.T) {
	for _, res := range resolvers() {
		t.Run(res.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openRoot(t, dir, res.walk)
			ctx := t.Context()
			mustCreate := func(name string) {
				if err := l.CreateExclusive(ctx, name, []byte(name)); err != nil {
					t.Fatal(err)
				}
			}
			mustCreate("file")
			mustCreate("dir/obj")
			if err := os.Symlink(dir, filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
				t.Fatal(err)
			}
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			w, err := l.Create(ctx, "file")
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("x"))
			commitErr := w.Commit(ctx)
			w.Abort()
			_, _, readDirErr := l.ReadFile(ctx, "dir")
			_, openFifoErr := l.Open(ctx, "fifo")
			_, statErr := l.Stat(ctx, "missing/obj")
			_, listErr := l.List(ctx, "missing")
			_, _, linkErr := l.ReadFile(ctx, "link/file")

			cases := []struct {
				what string
				err  error
				is   error
				name string
			}{
				{"exists", l.CreateExclusive(ctx, "file", nil), fs.ErrExist, "file"},
				{"commit over", commitErr, fs.ErrExist, "file"},
				{"mkdir exists", l.Mkdir(ctx, "dir"), fs.ErrExist, "dir"},
				{"not a dir", l.CreateExclusive(ctx, "file/below", []byte("x")), syscall.ENOTDIR, "file/below"},
				{"is a dir", readDirErr, syscall.EISDIR, "dir"},
				{"fifo", openFifoErr, nil, "fifo"},
				{"not empty", l.Delete(ctx, "dir"), syscall.ENOTEMPTY, "dir"},
				{"stat missing", statErr, fs.ErrNotExist, "missing/obj"},
				{"list missing", listErr, fs.ErrNotExist, "missing"},
				{"link", linkErr, fsys.ErrUnsafePath, "link/file"},
				{"bad name", l.Mkdir(ctx, "../escape"), fsys.ErrUnsafePath, "../escape"},
				{"precondition", l.Replace(ctx, "file", nil, "x"), fsys.ErrPrecondition, "file"},
				{"cancelled", l.Delete(cancelled, "file"), context.Canceled, "file"},
			}
			real, _ := filepath.EvalSymlinks(dir)
			for _, c := range cases {
				if c.err == nil {
					t.Errorf("%s: no error", c.what)
					continue
				}
				if c.is != nil && !errors.Is(c.err, c.is) {
					t.Errorf("%s: %v, want %v", c.what, c.err, c.is)
				}
				msg := c.err.Error()
				if strings.Contains(msg, dir) || strings.Contains(msg, real) || strings.Contains(msg, os.TempDir()) {
					t.Errorf("%s: message carries an absolute path: %s", c.what, msg)
				}
				if !strings.Contains(msg, strconv.Quote(c.name)) {
					t.Errorf("%s: message does not name %q: %s", c.what, c.name, msg)
				}
			}
			l.Close()
			if err := l.Mkdir(ctx, "after"); !errors.Is(err, fs.ErrClosed) || strings.Contains(err.Error(), real) {
				t.Errorf("after Close: %v", err)
			}
		})
	}
	// NewLocal's own errors leave the path out too.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := fsys.NewLocal(filepath.Join(file, "root"))
	if err == nil || strings.Contains(err.Error(), file) {
		t.Errorf("NewLocal below a file: %v", err)
	}
}

func TestCommittedReadOnlyAndTempNames(t *testing.T) {
	l := newLocal(t, false)
	ctx := t.Context()
	long := strings.Repeat("b", 250)
	for _, name := range []string{"p/obj.parquet", "p/" + long} {
		w, err := l.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("data"))
		entries, err := l.List(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		base := path.Base(name)
		var temps []string
		for _, e := range entries {
			if fsys.IsTemp(e.Name) {
				temps = append(temps, e.Name)
			}
		}
		want := regexp.MustCompile(`^\.[0-9a-f]{32}\.` + regexp.QuoteMeta(base[:min(len(base), 217)]) + `\.tmp$`)
		if len(temps) != 1 || !want.MatchString(temps[0]) || len(temps[0]) > 255 {
			t.Errorf("temps while writing %q = %q, want one matching %v", base, temps, want)
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(l.Root(), filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o444 {
			t.Errorf("committed %q has mode %v, want 0444", base, info.Mode().Perm())
		}
	}
}

func TestLocalDeleteDirectory(t *testing.T) {
	l := newLocal(t, false)
	ctx := t.Context()
	if err := l.Mkdir(ctx, "empty"); err != nil {
		t.Fatal(err)
	}
	if err := l.Delete(ctx, "empty"); err != nil {
		t.Errorf("Delete(empty dir): %v", err)
	}
	if _, err := l.Stat(ctx, "empty"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat after Delete: %v", err)
	}
	if err := l.CreateExclusive(ctx, "full/x", nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Delete(ctx, "full"); !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		t.Errorf("Delete(non-empty dir): %v, want ENOTEMPTY", err)
	}
	// DeleteAll of a file removes it (as os.RemoveAll).
	if err := l.DeleteAll(ctx, "full/x"); err != nil {
		t.Errorf("DeleteAll(file): %v", err)
	}
	if _, err := l.Stat(ctx, "full/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat after DeleteAll(file): %v", err)
	}
}

// TestLocalReplaceCreateRace: on local disks the empty Token creates with
// link(2), so it is atomic even without the manifest lock.
func TestLocalReplaceCreateRace(t *testing.T) {
	for _, res := range resolvers() {
		t.Run(res.name, func(t *testing.T) {
			l := newLocal(t, res.walk)
			const n = 16
			errs := make([]error, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					errs[i] = l.Replace(t.Context(), "m/manifest", []byte(strconv.Itoa(i)), "")
				})
			}
			close(start)
			wg.Wait()
			wins := 0
			for _, err := range errs {
				if err == nil {
					wins++
				} else if !errors.Is(err, fsys.ErrPrecondition) {
					t.Errorf("Replace: %v", err)
				}
			}
			if wins != 1 {
				t.Errorf("%d creators won, want 1", wins)
			}
		})
	}
}

func TestLocalTokenIsSHA256(t *testing.T) {
	l := newLocal(t, false)
	if err := l.CreateExclusive(t.Context(), "x", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	_, tok, err := l.ReadFile(t.Context(), "x")
	if err != nil || tok != tokenOf("hello") {
		t.Errorf("Token = %q, %v; want hex SHA-256 %q", tok, err, tokenOf("hello"))
	}
}

func TestLocalCloseAndNewRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "not", "yet")
	l, err := fsys.NewLocal(root)
	if err != nil {
		t.Fatalf("NewLocal of a missing root: %v", err)
	}
	if info, err := os.Stat(root); err != nil || !info.IsDir() {
		t.Fatalf("root not created: %v", err)
	}
	ctx := t.Context()
	w, err := l.Create(ctx, "top")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// A Writer opened before Close still commits.
	if err := w.Commit(ctx); err != nil {
		t.Errorf("Commit after Close: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "top")); err != nil || string(b) != "x" {
		t.Errorf("top = %q, %v", b, err)
	}
	if _, _, err := l.ReadFile(ctx, "top"); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("ReadFile after Close: %v", err)
	}
	if _, err := l.List(ctx, ""); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("List after Close: %v", err)
	}
}

// TestLocalFIFO: a FIFO planted under the root is refused, not waited on.
func TestLocalFIFO(t *testing.T) {
	l := newLocal(t, false)
	if err := unix.Mkfifo(filepath.Join(l.Root(), "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, _, err := l.ReadFile(t.Context(), "fifo"); err == nil {
			t.Error("ReadFile(fifo) succeeded")
		}
		if _, err := l.Open(t.Context(), "fifo"); err == nil {
			t.Error("Open(fifo) succeeded")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO hangs")
	}
}

// TestLocalMarkersShareAnInode: Local's markers are links to one empty
// inode (one directory entry each, no inode of their own), and a marker
// created where links fail is a file.
func TestLocalMarkersShareAnInode(t *testing.T) {
	root := t.TempDir()
	l, err := fsys.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := t.Context()
	for _, name := range []string{"v0/.0.parquet.claim", "v0/.1.parquet.claim", "w/.0.parquet.claim"} {
		if err := fsys.CreateMarker(ctx, l, name); err != nil {
			t.Fatal(err)
		}
	}
	a, err := os.Stat(filepath.Join(root, "v0/.0.parquet.claim"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Stat(filepath.Join(root, "w/.0.parquet.claim"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(a, b) || a.Size() != 0 {
		t.Errorf("markers are not links to one empty inode: %v %v", a, b)
	}
	fsys.DisableMarkers(l)
	if err := fsys.CreateMarker(ctx, l, "v0/.2.parquet.claim"); err != nil {
		t.Fatal(err)
	}
	c, err := os.Stat(filepath.Join(root, "v0/.2.parquet.claim"))
	if err != nil || os.SameFile(a, c) || c.Size() != 0 {
		t.Errorf("a marker without links: %v, %v", c, err)
	}
	if err := fsys.CreateMarker(ctx, l, "v0/.1.parquet.claim"); !errors.Is(err, fsys.ErrExist) {
		t.Errorf("CreateMarker over a marker: %v", err)
	}
}

// TestLocalMarkerContent: with SetMarkerContent every marker made after
// it holds the bytes (a link to one inode holding them, or a file of its
// own where links fail); markers made before keep theirs.
func TestLocalMarkerContent(t *testing.T) {
	root := t.TempDir()
	l, err := fsys.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := t.Context()
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	mk := func(name string) {
		t.Helper()
		if err := fsys.CreateMarker(ctx, l, name); err != nil {
			t.Fatal(err)
		}
	}
	mk("v0/.0.parquet.claim")
	l.SetMarkerContent([]byte(`{"pid":1}`))
	mk("v0/.1.parquet.claim")
	mk("v1/.0.parquet.claim")
	l.SetMarkerContent([]byte(`{"pid":2}`))
	mk("v0/.2.parquet.claim")
	fsys.DisableMarkers(l)
	mk("v0/.3.parquet.claim")
	for name, want := range map[string]string{
		"v0/.0.parquet.claim": "", "v0/.1.parquet.claim": `{"pid":1}`, "v1/.0.parquet.claim": `{"pid":1}`,
		"v0/.2.parquet.claim": `{"pid":2}`, "v0/.3.parquet.claim": `{"pid":2}`,
	} {
		if got := read(name); got != want {
			t.Errorf("%s holds %q, want %q", name, got, want)
		}
	}
}

// TestLocalCreateWhileEmptyDirsGo: directories are implicit, so a name
// made in a directory that another caller removes (empty; only local
// disks delete directories) at the same moment is still made: every way
// of making a name makes its parents again if they went. A failed first
// put removes the empty directories of its profile while another put may
// be making its first version there.
func TestLocalCreateWhileEmptyDirsGo(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	for _, res := range resolvers() {
		l := newLocal(t, res.walk)
		ctx := t.Context()
		makers := []struct {
			name string
			make func(name string) error
		}{
			{"Mkdir", func(name string) error { return l.Mkdir(ctx, name) }},
			{"CreateExclusive", func(name string) error { return l.CreateExclusive(ctx, name, []byte("x")) }},
			{"CreateMarker", func(name string) error { return l.CreateMarker(ctx, name) }},
			{"Create", func(name string) error {
				w, err := l.Create(ctx, name)
				if err != nil {
					return err
				}
				if _, err := w.Write([]byte("x")); err != nil {
					w.Abort()
					return err
				}
				return w.Commit(ctx)
			}},
			{"Replace", func(name string) error { return l.Replace(ctx, name, []byte("x"), "") }},
		}
		for _, m := range makers {
			t.Run(res.name+"/"+m.name, func(t *testing.T) {
				dirs := []string{"gone/" + m.name + "/v", "gone/" + m.name, "gone"}
				stop := make(chan struct{})
				var wg sync.WaitGroup
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						for _, d := range dirs {
							if l.Delete(ctx, d) != nil {
								break // not empty: someone is making a name in it
							}
						}
						time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
					}
				})
				for i := range rounds {
					name := fmt.Sprintf("%s/n%d", dirs[0], i)
					if err := m.make(name); err != nil {
						t.Errorf("round %d: %s(%q) while its empty parents are removed: %v", i, m.name, name, err)
						break
					}
					if _, err := l.Stat(ctx, name); err != nil {
						t.Errorf("round %d: %q after it was made: %v", i, name, err)
						break
					}
					if err := l.Delete(ctx, name); err != nil {
						t.Fatal(err)
					}
				}
				close(stop)
				wg.Wait()
			})
		}
	}
}

// TestCommitAfterFailedSync: a Writer whose write or sync failed is never
// published, even when nothing is left to flush and a second fdatasync
// would succeed (Linux reports a lost writeback once).
func TestCommitAfterFailedSync(t *testing.T) {
	ctx := context.Background()
	l, err := fsys.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w, err := l.Create(ctx, "d/obj")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := w.(fsys.DataSyncer).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	eio := errors.New("injected EIO")
	fsys.FailWriter(w, eio)
	if err := w.Commit(ctx); !errors.Is(err, eio) {
		t.Fatalf("Commit after a failed sync: %v, want the sync's error", err)
	}
	if _, err := l.Stat(ctx, "d/obj"); !errors.Is(err, fsys.ErrNotExist) {
		t.Fatalf("the object was published: %v", err)
	}
	if entries, _ := l.List(ctx, "d"); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}
