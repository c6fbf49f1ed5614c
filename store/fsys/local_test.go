package fsys_test

import (
	"testing"

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
