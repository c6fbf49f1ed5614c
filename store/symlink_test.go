package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/quiverdb/quiver/store/fsys"
)

// TestSymlinksNeverFollowed: the four ways outsiders got the old store to
// read or write outside the data dir (trust issue, item 8): a symlinked
// data file, a symlinked version directory (read, and append through it),
// and a symlinked bookkeeping directory (.log). Each is refused, and
// nothing outside the data dir is read or written.
func TestSymlinksNeverFollowed(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.parquet")
	ctx := context.Background()
	setup := func(t *testing.T) (*Store, string) {
		s, dir := newTestStore(t)
		k := []string{"p"}
		put(t, s, ModeWrite, k, ids(1, 2), PutOptions{})
		put(t, s, ModeAppend, k, ids(3), PutOptions{})
		// A real Parquet file outside, copied from the store.
		b, err := os.ReadFile(filepath.Join(dir, "p", "v0", "1.parquet"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(secret, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return s, dir
	}
	before := func(t *testing.T) []string { return tree(t, outside) }
	check := func(t *testing.T, was []string) {
		t.Helper()
		if got := tree(t, outside); len(got) != len(was) {
			t.Fatalf("something was written outside the data dir: %v (was %v)", got, was)
		}
	}
	read := func(s *Store) error {
		rdr, err := s.Read(ctx, []string{"p"}, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
		if err != nil {
			return err
		}
		defer rdr.Release()
		for rdr.Next() {
		}
		return rdr.Err()
	}
	t.Run("data file", func(t *testing.T) {
		s, dir := setup(t)
		was := before(t)
		f := filepath.Join(dir, "p", "v0", "1.parquet")
		os.Chmod(f, 0o644)
		os.Remove(f)
		if err := os.Symlink(secret, f); err != nil {
			t.Fatal(err)
		}
		if err := read(s); !errors.Is(err, ErrDataLoss) {
			t.Fatalf("read through a symlinked data file: %v, want ErrDataLoss", err)
		}
		check(t, was)
	})
	t.Run("version dir", func(t *testing.T) {
		s, dir := setup(t)
		vdir := filepath.Join(dir, "p", "v0")
		if err := os.Rename(vdir, filepath.Join(outside, "v0")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(outside, "v0"), vdir); err != nil {
			t.Fatal(err)
		}
		was := before(t)
		if err := read(s); err == nil {
			t.Fatal("read through a symlinked version dir succeeded")
		}
		rdr := ids(9)
		_, err := s.Append(ctx, []string{"p"}, rdr, PutOptions{})
		rdr.Release()
		if !errors.Is(err, fsys.ErrUnsafePath) {
			t.Fatalf("append through a symlinked version dir: %v, want ErrUnsafePath", err)
		}
		check(t, was)
	})
	t.Run("log dir", func(t *testing.T) {
		s, dir := setup(t)
		logd := filepath.Join(dir, "p", logDir)
		if err := os.Rename(logd, filepath.Join(outside, "log")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(outside, "log"), logd); err != nil {
			t.Fatal(err)
		}
		was := before(t)
		rdr := ids(9)
		_, err := s.Append(ctx, []string{"p"}, rdr, PutOptions{RequestID: "r"})
		rdr.Release()
		if err == nil {
			t.Fatal("commit through a symlinked log succeeded")
		}
		check(t, was)
	})
}
