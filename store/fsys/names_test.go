package fsys_test

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/fsystest"
)

func TestValidName(t *testing.T) {
	for _, name := range fsystest.UnsafeNames {
		if fsys.ValidName(name) {
			t.Errorf("ValidName(%q) = true", name)
		}
	}
	for _, name := range []string{"a", "a/b", "a.b/c..d", ".hidden", "a/...", "-", "ü/ß", "p/v1/0.parquet", ".a/b."} {
		if !fsys.ValidName(name) {
			t.Errorf("ValidName(%q) = false", name)
		}
	}
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{
		".0123.obj.tmp": true, ".x.tmp": true, "obj.tmp": false, ".tmp": false, ".obj": false, "": false,
	} {
		if got := fsys.IsTemp(name); got != want {
			t.Errorf("IsTemp(%q) = %v, want %v", name, got, want)
		}
	}
}

// validRef is ValidName by another route: path.Clean leaves a clean
// relative name alone, and only leading ".." survive it.
func validRef(name string) bool {
	return name != "" && name != "." && name != ".." && path.Clean(name) == name &&
		!path.IsAbs(name) && !strings.HasPrefix(name, "../") && !strings.ContainsAny(name, "\x00\\")
}

func FuzzValidName(f *testing.F) {
	for _, s := range append(fsystest.UnsafeNames, "a", "a/b", "..a", "a..", "a/.b", "...") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := fsys.ValidName(name), validRef(name); got != want {
			t.Errorf("ValidName(%q) = %v, reference says %v", name, got, want)
		}
	})
}

// FuzzLocalNames: whatever the name, Local either refuses it with
// ErrUnsafePath or writes below its root, nowhere else.
func FuzzLocalNames(f *testing.F) {
	for _, s := range append(fsystest.UnsafeNames, "a", "a/b/c", "../x", "x/../../y", "ü", strings.Repeat("d/", 50)+"f") {
		f.Add(s)
	}
	base := f.TempDir()
	root := filepath.Join(base, "root")
	l, err := fsys.NewLocal(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { l.Close() })
	f.Fuzz(func(t *testing.T, name string) {
		ctx := t.Context()
		err := l.CreateExclusive(ctx, name, []byte("x"))
		if !fsys.ValidName(name) {
			if !errors.Is(err, fsys.ErrUnsafePath) {
				t.Fatalf("CreateExclusive(%q) = %v, want ErrUnsafePath", name, err)
			}
		} else if err == nil {
			b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
			if err != nil || string(b) != "x" {
				t.Fatalf("%q not below the root: %v", name, err)
			}
		}
		// Clean up (any error will do: a name may be too long, say).
		l.DeleteAll(ctx, strings.SplitN(name, "/", 2)[0])
		entries, err := os.ReadDir(base)
		if err != nil || len(entries) != 1 || entries[0].Name() != "root" {
			t.Fatalf("something appeared beside the root after %q: %v %v", name, entries, err)
		}
	})
}
