package fsys_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiverdb/quiver/store/fsys"
)

// The beneath-the-root guard: symbolic links planted at every position of
// a name, for every operation, with both resolvers. Each call must fail
// with ErrUnsafePath and change nothing, inside the root or outside it.

const canary = "CANARY: must never be read or changed"

// guardEnv is a root and, beside it, a directory that must stay untouched.
type guardEnv struct {
	base, root, outside string
}

// link is a symbolic link planted below the root.
type link struct {
	name   string // relative to the root
	target string // as written into the link; "$ROOT" and "$OUT" expand
}

var plantedLinks = []link{
	{"lnin", "$ROOT/in/dir"},             // a directory inside the root
	{"lninrel", "in/dir"},                // the same, relative
	{"lnout", "$OUT/sub"},                // a directory outside
	{"lnoutrel", "../outside/sub"},       // the same, relative
	{"in/lf", "$ROOT/in/file"},           // a file inside
	{"in/lfrel", "file"},                 // the same, relative
	{"in/lof", "$OUT/canary"},            // a file outside
	{"in/dang", "$OUT/nonexistent"},      // dangling, outside
	{"in/dangrel", "nonexistent"},        // dangling, inside
	{"in/ldo", "$OUT/sub"},               // a directory outside, deeper
	{"a/b/lnk", "$OUT"},                  // the outside itself, deep
	{"rootlink", "$OUT/canary"},          // a file outside, in the root
	{"in/dir/self", "$ROOT/in/dir/self"}, // a loop
}

func newGuardEnv(t *testing.T) guardEnv {
	t.Helper()
	base := t.TempDir()
	e := guardEnv{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	files := map[string]string{
		"root/in/file":       "inside file",
		"root/in/dir/f":      "inside dir file",
		"root/a/b/c":         "deep",
		"outside/canary":     canary,
		"outside/sub/f":      canary + " (sub)",
		"outside/sub/canary": canary + " (sub canary)",
	}
	for name, data := range files {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range plantedLinks {
		target := strings.NewReplacer("$ROOT", e.root, "$OUT", e.outside).Replace(l.target)
		if err := os.Symlink(target, filepath.Join(e.root, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// snapshot describes a tree: every file with its content and mode, every
// directory, every link with its target.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			snap[rel] = "link " + target
		case d.IsDir():
			snap[rel] = "dir " + info.Mode().String()
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			snap[rel] = fmt.Sprintf("file %v %q %v", info.Mode(), data, info.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func diffSnap(before, after map[string]string) []string {
	var diffs []string
	for k := range maps.Keys(before) {
		if after[k] != before[k] {
			diffs = append(diffs, fmt.Sprintf("%s: %q → %q", k, before[k], after[k]))
		}
	}
	for k := range maps.Keys(after) {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: new %q", k, after[k]))
		}
	}
	slices.Sort(diffs)
	return diffs
}

func tokenOf(s string) fsys.Token {
	sum := sha256.Sum256([]byte(s))
	return fsys.Token(hex.EncodeToString(sum[:]))
}

// guardOps are the operations tried on each name. Each returns the
// error of the call and anything it read.
var guardOps = []struct {
	op string
	fn func(ctx context.Context, f fsys.FS, name string) (read string, err error)
}{
	{"CreateExclusive", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		return "", f.CreateExclusive(ctx, name, []byte("EVIL"))
	}},
	{"CreateExclusiveEmpty", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		return "", f.CreateExclusive(ctx, name, nil)
	}},
	{"CreateCommit", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		w, err := f.Create(ctx, name)
		if err != nil {
			return "", err
		}
		defer w.Abort()
		if _, err := w.Write([]byte("EVIL")); err != nil {
			return "", err
		}
		return "", w.Commit(ctx)
	}},
	{"ReadFile", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		b, _, err := f.ReadFile(ctx, name)
		return string(b), err
	}},
	{"ReplaceNew", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		return "", f.Replace(ctx, name, []byte("EVIL"), "")
	}},
	{"ReplaceCanaryToken", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		// The token of the content a followed link would find: only the
		// guard stands between this call and the canary.
		return "", f.Replace(ctx, name, []byte("EVIL"), tokenOf(canary))
	}},
	{"ReplaceInsideToken", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		return "", f.Replace(ctx, name, []byte("EVIL"), tokenOf("inside file"))
	}},
	{"Open", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		r, err := f.Open(ctx, name)
		if err != nil {
			return "", err
		}
		defer r.Close()
		b := make([]byte, 100)
		n, _ := r.ReadAt(b, 0)
		return string(b[:n]), nil
	}},
	{"Stat", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		e, err := f.Stat(ctx, name)
		return fmt.Sprint(e), err
	}},
	{"List", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		es, err := f.List(ctx, name)
		return fmt.Sprint(es), err
	}},
	{"Mkdir", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		return "", f.Mkdir(ctx, name)
	}},
	{"Delete", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		return "", f.Delete(ctx, name)
	}},
	{"DeleteAll", func(ctx context.Context, f fsys.FS, name string) (string, error) {
		return "", f.DeleteAll(ctx, name)
	}},
}

func resolvers() []struct {
	name string
	walk bool
} {
	return []struct {
		name string
		walk bool
	}{{"openat2", false}, {"walk", true}}
}

func openRoot(t *testing.T, root string, walk bool) *fsys.Local {
	t.Helper()
	open := fsys.NewLocal
	if walk {
		open = fsys.NewLocalWalk
	}
	l, err := open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestSymlinksRefused(t *testing.T) {
	for _, res := range resolvers() {
		for _, ln := range plantedLinks {
			t.Run(res.name+"/"+strings.ReplaceAll(ln.name, "/", "_"), func(t *testing.T) {
				e := newGuardEnv(t)
				l := openRoot(t, e.root, res.walk)
				before := snapshot(t, e.base)
				// The link as the last element, and as a directory on
				// the way to an existing, a new and a deeper name.
				names := []string{ln.name, ln.name + "/f", ln.name + "/canary", ln.name + "/new", ln.name + "/x/y"}
				for _, name := range names {
					for _, o := range guardOps {
						read, err := o.fn(t.Context(), l, name)
						if !errors.Is(err, fsys.ErrUnsafePath) {
							t.Errorf("%s(%q) = %v, want ErrUnsafePath", o.op, name, err)
						}
						if strings.Contains(read, "CANARY") || strings.Contains(read, "inside") {
							t.Errorf("%s(%q) read through a link: %q", o.op, name, read)
						}
						if d := diffSnap(before, snapshot(t, e.base)); len(d) > 0 {
							t.Fatalf("%s(%q) changed the disk:\n%s", o.op, name, strings.Join(d, "\n"))
						}
					}
				}
			})
		}
	}
}

// TestSymlinksListedNotFollowed: List shows links as links, and the rest
// of the root works around them.
func TestSymlinksListedNotFollowed(t *testing.T) {
	for _, res := range resolvers() {
		t.Run(res.name, func(t *testing.T) {
			e := newGuardEnv(t)
			l := openRoot(t, e.root, res.walk)
			entries, err := l.List(t.Context(), "in")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]fsys.Entry{}
			for _, en := range entries {
				got[en.Name] = en
			}
			for _, name := range []string{"lf", "lfrel", "lof", "dang", "dangrel", "ldo"} {
				if en := got[name]; !en.Link || en.Dir || en.Size != 0 {
					t.Errorf("List(in): %q = %+v, want a Link", name, en)
				}
			}
			if en := got["dir"]; !en.Dir || en.Link {
				t.Errorf("List(in): dir = %+v", en)
			}
			if en := got["file"]; en.Dir || en.Link || en.Size != int64(len("inside file")) {
				t.Errorf("List(in): file = %+v", en)
			}
			// Real names beside links still work.
			if b, _, err := l.ReadFile(t.Context(), "in/dir/f"); err != nil || string(b) != "inside dir file" {
				t.Errorf("ReadFile(in/dir/f) = %q, %v", b, err)
			}
			if err := l.CreateExclusive(t.Context(), "in/dir/new", []byte("ok")); err != nil {
				t.Errorf("CreateExclusive beside links: %v", err)
			}
		})
	}
}

// TestDeleteAllRemovesLinksNotTargets: links inside a deleted tree are
// removed as entries; what they point to stays.
func TestDeleteAllRemovesLinksNotTargets(t *testing.T) {
	for _, res := range resolvers() {
		t.Run(res.name, func(t *testing.T) {
			e := newGuardEnv(t)
			l := openRoot(t, e.root, res.walk)
			outBefore := snapshot(t, e.outside)
			inDirBefore := snapshot(t, filepath.Join(e.root, "in", "dir"))
			tree := filepath.Join(e.root, "t")
			for _, d := range []string{"t/sub/deeper"} {
				if err := os.MkdirAll(filepath.Join(e.root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, target := range map[string]string{
				"t/out":             e.outside,
				"t/sub/canary":      filepath.Join(e.outside, "canary"),
				"t/sub/deeper/in":   filepath.Join(e.root, "in", "dir"),
				"t/sub/deeper/dang": "nowhere",
			} {
				if err := os.Symlink(target, filepath.Join(e.root, name)); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(tree, "sub", "file"), []byte("x"), 0o444); err != nil {
				t.Fatal(err)
			}
			if err := l.DeleteAll(t.Context(), "t"); err != nil {
				t.Fatalf("DeleteAll: %v", err)
			}
			if _, err := os.Lstat(tree); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("tree still there: %v", err)
			}
			if d := diffSnap(outBefore, snapshot(t, e.outside)); len(d) > 0 {
				t.Errorf("outside changed:\n%s", strings.Join(d, "\n"))
			}
			if d := diffSnap(inDirBefore, snapshot(t, filepath.Join(e.root, "in", "dir"))); len(d) > 0 {
				t.Errorf("link target inside the root changed:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// TestSymlinkSwapRace swaps a directory for a link to the outside while
// calls run through it: whatever each call returns, nothing outside is
// read or written (the guard has no window between check and use).
func TestSymlinkSwapRace(t *testing.T) {
	for _, res := range resolvers() {
		t.Run(res.name, func(t *testing.T) {
			e := newGuardEnv(t)
			l := openRoot(t, e.root, res.walk)
			outBefore := snapshot(t, e.outside)
			race := filepath.Join(e.root, "race")
			d, parked := filepath.Join(race, "d"), filepath.Join(race, "parked")
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "canary"), []byte("the real one"), 0o644); err != nil {
				t.Fatal(err)
			}
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Go(func() {
				for !stop.Load() {
					// d: directory → link to outside → directory.
					if os.Rename(d, parked) == nil {
						os.Symlink(e.outside, d)
						time.Sleep(10 * time.Microsecond)
						os.Remove(d)
						os.Rename(parked, d)
					}
				}
			})
			ctx := t.Context()
			deadline := time.Now().Add(300 * time.Millisecond)
			for i := 0; time.Now().Before(deadline); i++ {
				name := fmt.Sprintf("race/d/new%d", i)
				l.CreateExclusive(ctx, name, []byte("EVIL"))
				if w, err := l.Create(ctx, name+"s"); err == nil {
					w.Write([]byte("EVIL"))
					w.Commit(ctx)
					w.Abort()
				}
				l.Replace(ctx, "race/d/canary", []byte("EVIL"), tokenOf(canary+" (sub canary)"))
				l.Mkdir(ctx, fmt.Sprintf("race/d/dir%d", i))
				if b, _, err := l.ReadFile(ctx, "race/d/canary"); err == nil && strings.Contains(string(b), "CANARY") {
					t.Errorf("ReadFile read the outside: %q", b)
				}
				if r, err := l.Open(ctx, "race/d/f"); err == nil {
					t.Errorf("Open found race/d/f, which exists only outside")
					r.Close()
				}
				l.Delete(ctx, "race/d/f")
				if i%10 == 9 {
					l.DeleteAll(ctx, "race/d")
				}
			}
			stop.Store(true)
			wg.Wait()
			if d := diffSnap(outBefore, snapshot(t, e.outside)); len(d) > 0 {
				t.Errorf("outside changed:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// TestRootThroughSymlink: the root itself may be reached through links.
func TestRootThroughSymlink(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(base, "alias")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("alias", filepath.Join(base, "alias2")); err != nil {
		t.Fatal(err)
	}
	for _, res := range resolvers() {
		t.Run(res.name, func(t *testing.T) {
			l := openRoot(t, filepath.Join(base, "alias2"), res.walk)
			wantRoot, _ := filepath.EvalSymlinks(real)
			if l.Root() != wantRoot {
				t.Errorf("Root = %q, want %q", l.Root(), wantRoot)
			}
			name := "obj-" + res.name
			if err := l.CreateExclusive(t.Context(), name, []byte("x")); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(real, name)); err != nil || string(b) != "x" {
				t.Errorf("file in the real root = %q, %v", b, err)
			}
		})
	}
}
