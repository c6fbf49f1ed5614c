package maint_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/maint"
)

// The false DATA_LOSS of CI 24 (the model test, seed 3841086094303129):
// list-versions answered "v21 holds data files Quiver wrote, but neither
// its .version.json nor a commit record" for a version that was a failed
// write being discarded. A version holding Quiver's data and no
// .version.json is one whose metadata was removed (red team round 30's
// n01) only if no writer of Quiver can leave it so: not a discard, a sweep
// or a kill during either, and not a listing taken while one ran.

// infoDeleteHook fails the commit log's writes while failLog is set (an
// I/O error at a commit: the put is discarded once its data is written),
// and runs hook once, as the .version.json of the version directory vdir
// is deleted, just before it is.
type infoDeleteHook struct {
	fsys.FS
	vdir    string
	failLog bool
	once    sync.Once
	hook    func()
}

func (h *infoDeleteHook) CreateExclusive(ctx context.Context, name string, data []byte) error {
	if h.failLog && strings.Contains(name, "/.log/") {
		return errors.New("injected: the log's disk failed")
	}
	return h.FS.CreateExclusive(ctx, name, data)
}

func (h *infoDeleteHook) Replace(ctx context.Context, name string, data []byte, ifMatch fsys.Token) error {
	if h.failLog && strings.Contains(name, "/.log/") {
		return errors.New("injected: the log's disk failed")
	}
	return h.FS.Replace(ctx, name, data, ifMatch)
}

func (h *infoDeleteHook) Delete(ctx context.Context, name string) error {
	if name == h.vdir+"/.version.json" {
		h.once.Do(h.hook)
	}
	return h.FS.Delete(ctx, name)
}

// TestDiscardOfPartitionedWriteIsNeverDataLoss: while a failed partitioned
// write's version is discarded, another server's list-versions, reads,
// inspection and verify see no lost data: its partition directories go
// before its .version.json.
func TestDiscardOfPartitionedWriteIsNeverDataLoss(t *testing.T) {
	ctx := context.Background()
	_, dir := newStore(t)
	k := []string{"parts"}
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	other, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := store.PutOptions{PartitionBy: []string{"region"}}
	var seen []string
	var looks []error
	h := &infoDeleteHook{FS: l, vdir: "parts/v1", hook: func() {
		seen, _ = filepath.Glob(filepath.Join(dir, "parts", "v1", "region=*"))
		_, _, err := other.Versions(ctx, k)
		looks = append(looks, err)
		_, err = other.Snapshot(ctx, k, store.SnapshotOptions{Version: 1})
		if errors.Is(err, store.ErrVersionNotFound) {
			err = nil
		}
		looks = append(looks, err)
		_, err = other.Inspect(ctx, k)
		looks = append(looks, err)
	}}
	w, err := store.Open(dir, store.WithFS(h))
	if err != nil {
		t.Fatal(err)
	}
	put(t, w, store.ModeWrite, k, fromJSON(t, regionSchema, `[{"id": 1, "region": "eu"}]`), o)
	rdr := fromJSON(t, regionSchema, `[{"id": 2, "region": "us"}, {"id": 3, "region": "eu"}]`)
	o.Mode = store.ModeWrite
	h.failLog = true
	_, err = w.Put(ctx, k, rdr, o)
	h.failLog = false
	rdr.Release()
	if err == nil {
		t.Fatal("a write whose commit failed was acknowledged")
	}
	if looks == nil {
		t.Fatalf("the failed write's .version.json was never deleted (%v)", err)
	}
	if len(seen) != 0 {
		t.Errorf("partition directories %v still there as the .version.json went", seen)
	}
	for _, err := range looks {
		if err != nil {
			t.Errorf("a look during the discard: %v", err)
		}
	}
	vr, err := maint.Verify(ctx, other, maint.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range vr.Problems {
		t.Errorf("verify: %s %s: %s", p.Kind, p.Path, p.Detail)
	}
	if got := readIDs(t, other, k, -1); !slices.Equal(got, []int64{1}) {
		t.Errorf("read %v, want [1]", got)
	}
}

// staleListFS answers the first listing of a version directory as a
// listing taken while its .version.json went would: without it.
type staleListFS struct {
	fsys.FS
	dir  string
	once sync.Once
}

func (s *staleListFS) List(ctx context.Context, dir string) ([]fsys.Entry, error) {
	entries, err := s.FS.List(ctx, dir)
	if dir == s.dir {
		s.once.Do(func() {
			entries = slices.DeleteFunc(entries, func(e fsys.Entry) bool { return e.Name == ".version.json" })
		})
	}
	return entries, err
}

// TestUnlabelledDataIsLookedAtAgain: a listing that shows a version's data
// files without its .version.json (a listing is no snapshot) is not taken
// for lost metadata: the loader looks at the .version.json itself.
func TestUnlabelledDataIsLookedAtAgain(t *testing.T) {
	ctx := context.Background()
	for _, partitioned := range []bool{false, true} {
		t.Run(map[bool]string{false: "one file", true: "partitioned"}[partitioned], func(t *testing.T) {
			w, dir := newStore(t)
			k := []string{"p"}
			var o store.PutOptions
			rows := func() array.RecordReader { return ids(1) }
			if partitioned {
				o.PartitionBy = []string{"region"}
				rows = func() array.RecordReader { return fromJSON(t, regionSchema, `[{"id": 1, "region": "eu"}]`) }
			}
			put(t, w, store.ModeWrite, k, rows(), o)
			// An uncommitted version above the latest: a running write's.
			uncommitted := filepath.Join(dir, "p", "v1")
			if err := os.CopyFS(uncommitted, os.DirFS(filepath.Join(dir, "p", "v0"))); err != nil {
				t.Fatal(err)
			}
			l, err := fsys.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(dir, store.WithFS(&staleListFS{FS: l, dir: "p/v1"}))
			if err != nil {
				t.Fatal(err)
			}
			latest, vers, err := s.Versions(ctx, k)
			if err != nil || latest != 0 || len(vers) != 1 {
				t.Fatalf("versions: latest %d, %+v, %v; want v0 alone", latest, vers, err)
			}
		})
	}
}

// TestKilledDiscardLeftoverIsNoDataLoss: a discard killed (by an older
// Quiver, which removed .version.json first) between its .version.json and
// its partition directories leaves empty partition directories: no data
// of anyone's. Reads, list-versions and verify answer as for any abandoned
// version, and sweep removes it.
func TestKilledDiscardLeftoverIsNoDataLoss(t *testing.T) {
	ctx := context.Background()
	w, dir := newStore(t)
	k := []string{"parts"}
	put(t, w, store.ModeWrite, k, fromJSON(t, regionSchema, `[{"id": 1, "region": "eu"}]`), store.PutOptions{PartitionBy: []string{"region"}})
	left := filepath.Join(dir, "parts", "v1", "region=us")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	for _, d := range []string{left, filepath.Dir(left)} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if latest, vers, err := s.Versions(ctx, k); err != nil || latest != 0 || len(vers) != 1 {
		t.Fatalf("versions: latest %d, %+v, %v; want v0 alone", latest, vers, err)
	}
	if _, err := s.Snapshot(ctx, k, store.SnapshotOptions{Version: 1}); !errors.Is(err, store.ErrVersionNotFound) {
		t.Errorf("read of v1: %v, want not found", err)
	}
	vr, err := maint.Verify(ctx, s, maint.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range vr.Problems {
		if p.Kind == maint.ProblemMutated {
			t.Errorf("verify: %s %s: %s", p.Kind, p.Path, p.Detail)
		}
	}
	if _, err := maint.Sweep(ctx, s, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(left)); !os.IsNotExist(err) {
		t.Errorf("sweep left the abandoned v1: %v", err)
	}
	if got := readIDs(t, s, k, -1); !slices.Equal(got, []int64{1}) {
		t.Errorf("read %v, want [1]", got)
	}
}

// TestEmptyLatestAfterDotlessRestoreIsDataLoss: a restore that skipped
// dot-files (the log, the kind marker, every .version.json) and left the
// latest version's directory empty: the manifest names an empty directory
// of a profile whose older version holds data Quiver wrote, so reads of
// the latest answer DATA_LOSS, not an empty table (red team round 36's
// s11).
func TestEmptyLatestAfterDotlessRestoreIsDataLoss(t *testing.T) {
	ctx := context.Background()
	for _, partitioned := range []bool{false, true} {
		t.Run(map[bool]string{false: "one file", true: "partitioned"}[partitioned], func(t *testing.T) {
			w, dir := newStore(t)
			k := []string{"y", "b"}
			var o store.PutOptions
			if partitioned {
				o.PartitionBy = []string{"region"}
			}
			put(t, w, store.ModeWrite, k, fromJSON(t, regionSchema, `[{"id": 1, "region": "eu"}]`), o)
			put(t, w, store.ModeWrite, k, ids(2, 3), store.PutOptions{})
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			pd := filepath.Join(dir, "y", "b")
			for _, name := range []string{".log", ".quiver.kind", "v0/.version.json", "v1"} {
				if err := os.RemoveAll(filepath.Join(pd, name)); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Mkdir(filepath.Join(pd, "v1"), 0o755); err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Snapshot(ctx, k, store.SnapshotOptions{Version: store.Latest}); !errors.Is(err, store.ErrDataLoss) {
				t.Errorf("read of the latest: %v, want DataLoss", err)
			}
		})
	}
}
