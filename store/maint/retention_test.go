package maint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/faultfs"
	"github.com/quiverdb/quiver/store/maint"
)

// fakeClock is a settable clock for store.WithClock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// manifestOK fails unless the manifest names a version that reads.
func manifestOK(t *testing.T, s *store.Store, keys []string) int {
	t.Helper()
	sn, err := s.Snapshot(context.Background(), keys, store.SnapshotOptions{Version: store.Latest})
	if err != nil {
		t.Fatalf("latest: %v", err)
	}
	readIDs(t, s, keys, sn.Version)
	return sn.Version
}

func TestRemoveOldVersions(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		keep    int
		grace   time.Duration
		now     time.Duration // since t0
		removed string
		kept    int
	}{
		// v0 superseded at +10m, v1 at +20m, v2 at +30m; v3 is the latest.
		{"all within grace", 1, time.Hour, 40 * time.Minute, "[]", 3},
		{"oldest past grace", 1, time.Hour, 75 * time.Minute, "[v0]", 2},
		{"two past grace", 1, time.Hour, 85 * time.Minute, "[v0 v1]", 1},
		{"keep 2, grace 0", 2, 0, 0, "[v0 v1]", 0},
		{"keep 1, grace 0", 1, 0, 0, "[v0 v1 v2]", 0},
		{"keep more than there are", 9, 0, 0, "[]", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := &fakeClock{now: t0}
			s, dir := newStore(t, store.WithClock(clk.Now))
			ctx := context.Background()
			k := []string{"r"}
			put(t, s, store.ModeWrite, k, ids(1), store.PutOptions{})
			clk.Set(t0.Add(time.Minute))
			put(t, s, store.ModeAppend, k, ids(2), store.PutOptions{})
			for i := 1; i <= 3; i++ {
				clk.Set(t0.Add(time.Duration(i) * 10 * time.Minute))
				put(t, s, store.ModeWrite, k, ids(int64(10*i), int64(10*i+1)), store.PutOptions{})
			}
			// A write in progress: newer than the manifest's latest.
			if err := os.Mkdir(filepath.Join(dir, "r", "v4"), 0o755); err != nil {
				t.Fatal(err)
			}
			// File times say everything is ancient: they must not matter.
			for _, rel := range tree(t, dir) {
				touchOld(t, filepath.Join(dir, rel), 24*365*time.Hour)
			}
			before := readIDs(t, s, k, -1)
			clk.Set(t0.Add(c.now))
			rep, err := maint.RemoveOldVersions(ctx, s, k, c.keep, c.grace, "retention-job")
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(rep.Removed) != c.removed || len(rep.Kept) != c.kept {
				t.Fatalf("removed %v, kept %+v; want %s and %d kept", rep.Removed, rep.Kept, c.removed, c.kept)
			}
			if v := manifestOK(t, s, k); v != 3 {
				t.Fatalf("manifest moved to v%d", v)
			}
			if after := readIDs(t, s, k, -1); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("latest changed: %v -> %v", before, after)
			}
			retired := map[string]bool{}
			if err := s.Lineage(ctx, k, func(r *store.CommitRecord) error {
				if r.Mode == store.ModeRetire {
					retired[r.Version] = true
					if r.Writer != "retention-job" || !r.Committed.Equal(t0.Add(c.now)) || len(r.Files) != 0 {
						t.Errorf("retire record %s", r.Line())
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(retired) != len(rep.Removed) {
				t.Fatalf("retire records for %v, removed %v", retired, rep.Removed)
			}
			for _, v := range rep.Removed {
				if !retired[v] {
					t.Fatalf("%s removed without a retire record", v)
				}
				if _, err := os.Stat(filepath.Join(dir, "r", v)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("%s still there: %v", v, err)
				}
				n, _ := store.ParseVersion(v)
				if _, err := s.Read(ctx, k, store.ReadOptions{SnapshotOptions: store.SnapshotOptions{Version: n}}); !errors.Is(err, store.ErrVersionNotFound) {
					t.Fatalf("read of removed %s: %v", v, err)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "r", "v4")); err != nil {
				t.Fatalf("in-progress v4 touched: %v", err)
			}
			_, vs, err := s.Versions(ctx, k)
			if err != nil || len(vs) != 4-len(rep.Removed) {
				t.Fatalf("versions %+v %v", vs, err)
			}
			for _, kv := range rep.Kept {
				if kv.Reason == "" || !strings.HasPrefix(kv.Version, "v") {
					t.Fatalf("kept %+v", kv)
				}
			}
		})
	}
	s, _ := newStore(t)
	put(t, s, store.ModeWrite, []string{"x"}, ids(1), store.PutOptions{})
	for _, c := range []struct {
		keys  []string
		keep  int
		grace time.Duration
		want  error
	}{
		{[]string{"x"}, 0, 0, store.ErrInvalidArgument},
		{[]string{"x"}, 1, -time.Second, store.ErrInvalidArgument},
		{[]string{"nope"}, 1, 0, store.ErrNotFound},
		{[]string{"v0"}, 1, 0, store.ErrInvalidKey},
	} {
		if _, err := maint.RemoveOldVersions(context.Background(), s, c.keys, c.keep, c.grace, ""); !errors.Is(err, c.want) {
			t.Errorf("%v keep %d grace %s: got %v, want %v", c.keys, c.keep, c.grace, err, c.want)
		}
	}
}

// TestRemoveOldVersionsUndatable: a version whose successor has no write
// record and no .version.json (pyrosome wrote it) cannot be dated; it is
// kept unless grace is 0.
func TestRemoveOldVersionsUndatable(t *testing.T) {
	s, dir := newStore(t)
	ctx := context.Background()
	k := []string{"py"}
	put(t, s, store.ModeWrite, k, ids(1), store.PutOptions{})
	// pyrosome writes v1: its files, then the manifest.
	copyTree(t, filepath.Join(pyrosomeFixture, "events", "v0"), filepath.Join(dir, "py", "v1"))
	writeFile(t, filepath.Join(dir, "py", "manifest.json"), "{\n    \"latest_data_dir\": \"v1\"\n}", 0)
	rep, err := maint.RemoveOldVersions(ctx, s, k, 1, time.Nanosecond, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 0 || len(rep.Kept) != 1 || rep.Kept[0].Version != "v0" || !strings.Contains(rep.Kept[0].Reason, "unknown") {
		t.Fatalf("%+v", rep)
	}
	if rep, err = maint.RemoveOldVersions(ctx, s, k, 1, 0, ""); err != nil || fmt.Sprint(rep.Removed) != "[v0]" {
		t.Fatalf("%+v %v", rep, err)
	}
	sn, err := s.Snapshot(ctx, k, store.SnapshotOptions{Version: store.Latest})
	if err != nil || sn.Version != 1 || len(sn.Files) != 3 {
		t.Fatalf("pyrosome's latest after retention: %+v %v", sn, err)
	}
}

// TestRemoveOldVersionsConcurrentWrites: retention racing writers (in
// other servers) never leaves the manifest pointing at a missing version,
// never fails a write, and never retires the latest.
func TestRemoveOldVersionsConcurrentWrites(t *testing.T) {
	s, dir := newStore(t)
	k := []string{"busy"}
	put(t, s, store.ModeWrite, k, ids(0), store.PutOptions{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := 0; w < 3; w++ {
		srv, err := store.Open(dir, store.WithLockTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				mode := store.ModeWrite
				if i%2 == 1 {
					mode = store.ModeAppend
				}
				rdr := ids(int64(w*100 + i))
				_, err := srv.Put(ctx, k, rdr, store.PutOptions{Mode: mode})
				rdr.Release()
				if err != nil {
					errs <- err
				}
			}
		}(w)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	rounds := 0
	for running := true; running; rounds++ {
		select {
		case <-done:
			running = false
		default:
		}
		if _, err := maint.RemoveOldVersions(ctx, s, k, 1, 0, ""); err != nil {
			t.Fatal(err)
		}
		manifestOK(t, s, k)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	manifestOK(t, s, k)
	if vr, err := maint.Verify(ctx, s, maint.VerifyOptions{}); err != nil || !vr.OK {
		t.Fatalf("verify after %d retention rounds: %+v %v", rounds, vr, err)
	}
}

// TestRemoveOldVersionsDeleteFails: a retired version whose directory
// could not be deleted (an I/O error after its retire record) is gone for
// readers, reported by verify as an orphan, and removed by sweep.
func TestRemoveOldVersionsDeleteFails(t *testing.T) {
	dir := t.TempDir()
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ff := faultfs.New(l)
	s, err := store.Open(dir, store.WithFS(ff))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k := []string{"r"}
	put(t, s, store.ModeWrite, k, ids(1), store.PutOptions{})
	put(t, s, store.ModeWrite, k, ids(2), store.PutOptions{})
	ff.Add(faultfs.Rule{Op: faultfs.Delete | faultfs.DeleteAll, Glob: "0.parquet", Err: syscall.EIO})
	rep, err := maint.RemoveOldVersions(ctx, s, k, 1, 0, "")
	if err != nil || fmt.Sprint(rep.Removed) != "[v0]" {
		t.Fatalf("retention: %+v %v", rep, err)
	}
	ff.Clear()
	if _, err := s.Read(ctx, k, store.ReadOptions{SnapshotOptions: store.SnapshotOptions{Version: 0}}); !errors.Is(err, store.ErrVersionNotFound) {
		t.Fatalf("read of a retired version: %v", err)
	}
	vr, err := maint.Verify(ctx, s, maint.VerifyOptions{})
	if err != nil || strings.Join(problems(vr.Problems), ",") != "orphan r/v0" {
		t.Fatalf("verify: %+v %v", vr, err)
	}
	sw, err := maint.Sweep(ctx, s, time.Hour)
	if err != nil || fmt.Sprint(sw.Removed) != "[r/v0]" {
		t.Fatalf("sweep: %+v %v", sw, err)
	}
	if vr, err := maint.Verify(ctx, s, maint.VerifyOptions{}); err != nil || !vr.OK {
		t.Fatalf("verify after sweep: %+v %v", vr, err)
	}
}

// commitHookFS runs hook once, just before the next exclusive create of a
// manifest lock: a put has written its files and is about to commit.
type commitHookFS struct {
	fsys.FS
	hook func()
}

func (h *commitHookFS) CreateExclusive(ctx context.Context, name string, data []byte) error {
	if h.hook != nil && strings.HasSuffix(name, "/manifest.json.write_lock") {
		fn := h.hook
		h.hook = nil
		fn()
	}
	return h.FS.CreateExclusive(ctx, name, data)
}

// TestAppendSurvivesRetirementOfItsVersion: an append streams into the
// latest version; before it commits, another server writes a newer
// version and retention (grace 0) retires the one the append streamed
// into. The append must still commit (re-targeted into the latest) or
// fail as retryable — not as a failed client stream. Found by
// TestRemoveOldVersionsConcurrentWrites: "the put's stream failed: …
// file v7/2.parquet is gone: its version was removed by retention".
func TestAppendSurvivesRetirementOfItsVersion(t *testing.T) {
	dir := t.TempDir()
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := &commitHookFS{FS: l}
	s, err := store.Open(dir, store.WithFS(h))
	if err != nil {
		t.Fatal(err)
	}
	other, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k := []string{"r"}
	put(t, s, store.ModeWrite, k, ids(1), store.PutOptions{})
	h.hook = func() {
		put(t, other, store.ModeWrite, k, ids(2), store.PutOptions{})
		if rep, err := maint.RemoveOldVersions(ctx, other, k, 1, 0, ""); err != nil || fmt.Sprint(rep.Removed) != "[v0]" {
			t.Errorf("retention: %+v %v", rep, err)
		}
	}
	rdr := ids(3)
	defer rdr.Release()
	c, err := s.Append(ctx, k, rdr, store.PutOptions{RequestID: "a-3"})
	if h.hook != nil {
		t.Fatal("the hook never ran")
	}
	if err != nil {
		if errors.Is(err, store.ErrBadStream) || !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("the append failed as if its client's stream had: %v", err)
		}
		return // retryable: acceptable
	}
	if c.Version != "v1" {
		t.Fatalf("append committed to %s", c.Version)
	}
	if got := readIDs(t, s, k, -1); fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("latest %v", got)
	}
}

// TestRemoveOldVersionsOfNoProfileChangesNothing: retention of a profile
// that does not exist is NotFound and creates nothing (it used to take the
// lock first, which made the profile's directory).
func TestRemoveOldVersionsOfNoProfileChangesNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, store.ModeWrite, []string{"events"}, ids(1), store.PutOptions{})
	for _, k := range [][]string{{"events", "sub"}, {"nope"}} {
		if _, err := maint.RemoveOldVersions(context.Background(), s, k, 1, 0, ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%v: %v, want ErrNotFound", k, err)
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.Join(k...))); err == nil {
			t.Fatalf("%v: retention created the profile's directory", k)
		}
	}
}

// hookReader yields its batches, running hook once before the batch at
// index at: the put is streaming then.
type hookReader struct {
	array.RecordReader
	n, at int
	hook  func()
}

func (h *hookReader) Next() bool {
	if h.n == h.at && h.hook != nil {
		fn := h.hook
		h.hook = nil
		fn()
	}
	h.n++
	return h.RecordReader.Next()
}

// TestPartitionedAppendSurvivesRetirementOfItsVersion: a partitioned
// append of this server is streaming into the latest version when a
// write supersedes it and retention (grace 0) retires it; the append is
// re-targeted into the latest version and commits, as an unpartitioned
// one does (red team round 34's r11: retention removed the version's
// directory and the append failed, UNAVAILABLE).
func TestPartitionedAppendSurvivesRetirementOfItsVersion(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	k := []string{"r11"}
	sc := arrow.NewSchema([]arrow.Field{{Name: "region", Type: arrow.BinaryTypes.String}, {Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	o := store.PutOptions{PartitionBy: []string{"region"}}
	put(t, s, store.ModeWrite, k, fromJSON(t, sc, `[{"region": "eu", "id": 1}]`), o)
	rdr := &hookReader{RecordReader: twoBatches(t, sc, `[{"region": "eu", "id": 3}]`, `[{"region": "us", "id": 4}]`), at: 1}
	defer rdr.RecordReader.Release()
	rdr.hook = func() {
		put(t, s, store.ModeWrite, k, fromJSON(t, sc, `[{"region": "eu", "id": 2}]`), o)
		if rep, err := maint.RemoveOldVersions(ctx, s, k, 1, 0, ""); err != nil || fmt.Sprint(rep.Removed) != "[v0]" {
			t.Errorf("retention: %+v %v", rep, err)
		}
	}
	c, err := s.Append(ctx, k, rdr, store.PutOptions{RequestID: "r11"})
	if rdr.hook != nil {
		t.Fatal("the hook never ran")
	}
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if c.Version != "v1" {
		t.Fatalf("append committed to %s", c.Version)
	}
	if got := readIDs(t, s, k, -1); fmt.Sprint(got) != "[2 3 4]" {
		t.Fatalf("latest %v", got)
	}
	rep, err := maint.Sweep(ctx, s, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if vr, err := maint.Verify(ctx, s, maint.VerifyOptions{}); err != nil || !vr.OK {
		t.Fatalf("verify after sweep %+v: %+v %v", rep, vr, err)
	}
}
