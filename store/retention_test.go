package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock for WithClock.
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

// manifestOK fails unless the manifest names an existing version.
func manifestOK(t *testing.T, s *Store, keys []string) int {
	t.Helper()
	p, err := s.resolve(keys)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.readManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.fs.Stat(p.join(VersionName(v))); err != nil {
		t.Fatalf("manifest names %s: %v", VersionName(v), err)
	}
	return v
}

func TestRemoveOldVersions(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		keep    int
		grace   time.Duration
		now     time.Duration // since t0
		removed string
	}{
		// v0 superseded at +10m, v1 at +20m, v2 at +30m; v3 is the latest.
		{"all within grace", 1, time.Hour, 40 * time.Minute, "[]"},
		{"oldest past grace", 1, time.Hour, 75 * time.Minute, "[v0]"},
		{"two past grace", 1, time.Hour, 85 * time.Minute, "[v0 v1]"},
		{"keep 2, grace 0", 2, 0, 0, "[v0 v1]"},
		{"keep 1, grace 0", 1, 0, 0, "[v0 v1 v2]"},
		{"keep more than there are", 9, 0, 0, "[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := &fakeClock{now: t0}
			s, dir := newTestStore(t, WithClock(clk.Now))
			k := []string{"r"}
			put(t, s, ModeWrite, k, ids(1), PutOptions{})
			clk.Set(t0.Add(time.Minute))
			put(t, s, ModeAppend, k, ids(2), PutOptions{})
			for i := 1; i <= 3; i++ {
				clk.Set(t0.Add(time.Duration(i) * 10 * time.Minute))
				put(t, s, ModeWrite, k, ids(int64(10*i), int64(10*i+1)), PutOptions{})
			}
			// A write in progress: newer than the manifest's latest.
			if err := os.Mkdir(filepath.Join(dir, "r", "v4"), 0o755); err != nil {
				t.Fatal(err)
			}
			// File times say everything is ancient: they must not matter.
			for _, rel := range tree(t, dir) {
				touchOld(t, filepath.Join(dir, rel), 24*365*time.Hour)
			}
			_, before := readAll(t, s, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: -1}})
			clk.Set(t0.Add(c.now))
			rep, err := s.RemoveOldVersions(context.Background(), k, c.keep, c.grace)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(rep.Removed) != c.removed {
				t.Fatalf("removed %v, want %s (kept %+v)", rep.Removed, c.removed, rep.Kept)
			}
			if v := manifestOK(t, s, k); v != 3 {
				t.Fatalf("manifest moved to v%d", v)
			}
			if _, after := readAll(t, s, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: -1}}); after != before {
				t.Fatalf("latest changed: %s -> %s", before, after)
			}
			for _, v := range rep.Removed {
				if _, err := os.Stat(filepath.Join(dir, "r", v)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("%s still there: %v", v, err)
				}
				n, _ := ParseVersion(v)
				if _, err := s.Read(context.Background(), k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: n}}); !errors.Is(err, ErrVersionNotFound) {
					t.Fatalf("read of removed %s: %v", v, err)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "r", "v4")); err != nil {
				t.Fatalf("in-progress v4 touched: %v", err)
			}
			for _, e := range tree(t, filepath.Join(dir, "r")) {
				if strings.Contains(e, "deleting") {
					t.Fatalf("leftover %s", e)
				}
			}
			if _, _, err := s.Versions(context.Background(), k); err != nil {
				t.Fatal(err)
			}
		})
	}
	s, _ := newTestStore(t)
	put(t, s, ModeWrite, []string{"x"}, ids(1), PutOptions{})
	if _, err := s.RemoveOldVersions(context.Background(), []string{"x"}, 0, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("keep 0: %v", err)
	}
}

// TestRemoveOldVersionsUndatable: versions whose successor has no write
// record (pyrosome) cannot be dated and are kept unless grace is 0.
func TestRemoveOldVersionsUndatable(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"py"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	put(t, s, ModeWrite, k, ids(2), PutOptions{})
	if err := os.Remove(filepath.Join(dir, "py", "v1", ".0.commit.json")); err != nil {
		t.Fatal(err)
	}
	rep, err := s.RemoveOldVersions(context.Background(), k, 1, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 0 || len(rep.Kept) != 1 || rep.Kept[0].Version != "v0" {
		t.Fatalf("%+v", rep)
	}
	if rep, err = s.RemoveOldVersions(context.Background(), k, 1, 0); err != nil || fmt.Sprint(rep.Removed) != "[v0]" {
		t.Fatalf("%+v %v", rep, err)
	}
}

// TestRemoveOldVersionsConcurrentWrites: retention racing writers never
// leaves the manifest pointing at a missing version and never fails a
// write.
func TestRemoveOldVersionsConcurrentWrites(t *testing.T) {
	s, _ := newTestStore(t)
	k := []string{"busy"}
	put(t, s, ModeWrite, k, ids(0), PutOptions{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				rdr := ids(int64(w*100 + i))
				_, err := s.Put(ctx, k, rdr, PutOptions{Mode: ModeWrite})
				rdr.Release()
				if err != nil {
					errs <- err
				}
			}
		}(w)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		if _, err := s.RemoveOldVersions(ctx, k, 1, 0); err != nil {
			t.Fatal(err)
		}
		manifestOK(t, s, k)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	manifestOK(t, s, k)
	if _, rows := readAll(t, s, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: -1}}); !strings.HasPrefix(rows, `[{"id":`) {
		t.Fatalf("latest: %s", rows)
	}
	if vr, err := s.Verify(ctx, VerifyOptions{}); err != nil || !vr.OK {
		t.Fatalf("verify: %+v %v", vr, err)
	}
}
