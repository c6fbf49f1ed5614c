package reliability

import (
	"context"
	"fmt"
	"strings"
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

func recordReader(recs ...arrow.RecordBatch) array.RecordReader {
	r, err := array.NewRecordReader(rowSchema, recs)
	if err != nil {
		panic(err)
	}
	return r
}

// storeIDs reads every version of a profile through the store and returns
// id → count.
func storeIDs(t *testing.T, s *store.Store, keys []string) map[int64]int {
	t.Helper()
	ctx := context.Background()
	out := map[int64]int{}
	_, vers, err := s.Versions(ctx, keys)
	if err != nil {
		t.Fatalf("versions: %v", err)
	}
	for _, v := range vers {
		var n int
		fmt.Sscan(strings.TrimPrefix(v.Version, "v"), &n)
		rdr, err := s.Read(ctx, keys, store.ReadOptions{SnapshotOptions: store.SnapshotOptions{Version: n}, Columns: []string{"id"}})
		if err != nil {
			t.Fatalf("read %s: %v", v.Version, err)
		}
		for rdr.Next() {
			for _, id := range rdr.RecordBatch().Column(0).(*array.Int64).Int64Values() {
				out[id]++
			}
		}
		if err := rdr.Err(); err != nil {
			t.Fatalf("read %s: %v", v.Version, err)
		}
		rdr.Release()
	}
	return out
}

// TestStoreENOSPC: a disk that fills up at each step of a put (the data
// file, its commit, the claim of an index, the version directory and its
// .version.json, the commit log segment, the log head, the manifest, the
// lock), and at each sync a put makes on a local disk (fsys.Relaxed, which
// faultfs over Local is: the directories its files and claims are in, the
// segment's content, the log directory once the segment is linked). The
// put must fail and leave nothing visible (DESIGN.md §3: "a stream that
// fails commits nothing") — or, where the failure comes after the commit
// point, be acknowledged with its rows exactly once, or (committed) be
// told to retry with its request_id; verify must report at most sweepable
// leftovers, and once space is back the same put (same request_id) must
// succeed with its rows visible exactly once.
func TestStoreENOSPC(t *testing.T) {
	requireStress(t)
	enospc := syscall.ENOSPC
	// The segment is created by CreateExclusive on storage durable at
	// every call, by CreateSync (a Create) on relaxed storage.
	segment := faultfs.CreateExclusive | faultfs.Create
	cases := []struct {
		name string
		mode store.Mode
		rule faultfs.Rule
		// committed: a failed put is committed all the same (the
		// fault came after the commit point) and says to retry with
		// its request_id.
		committed bool
	}{
		{"data file write", store.ModeAppend, faultfs.Rule{Op: faultfs.Write, Glob: "*.parquet", Err: enospc}, false},
		{"data file create", store.ModeAppend, faultfs.Rule{Op: faultfs.Create, Glob: "*.parquet", Err: enospc}, false},
		{"data file commit", store.ModeAppend, faultfs.Rule{Op: faultfs.Commit, Glob: "*.parquet", Err: enospc}, false},
		{"claim index", store.ModeAppend, faultfs.Rule{Op: faultfs.CreateExclusive, Glob: "*.claim", Err: enospc}, false},
		{"lock", store.ModeAppend, faultfs.Rule{Op: faultfs.CreateExclusive, Glob: "manifest.json.write_lock", Err: enospc}, false},
		{"log segment (append)", store.ModeAppend, faultfs.Rule{Op: segment, Glob: "*.ndjson", Err: enospc}, false},
		{"log head (append)", store.ModeAppend, faultfs.Rule{Op: faultfs.Replace, Glob: "HEAD", Err: enospc}, false},
		{"data file write (write)", store.ModeWrite, faultfs.Rule{Op: faultfs.Write, Glob: "*.parquet", Err: enospc}, false},
		{"version dir", store.ModeWrite, faultfs.Rule{Op: faultfs.Mkdir, Glob: "v*", Err: enospc}, false},
		{"version info", store.ModeWrite, faultfs.Rule{Op: faultfs.CreateExclusive, Glob: ".version.json", Err: enospc}, false},
		{"log segment (write)", store.ModeWrite, faultfs.Rule{Op: segment, Glob: "*.ndjson", Err: enospc}, false},
		{"manifest (write)", store.ModeWrite, faultfs.Rule{Op: faultfs.Replace, Glob: "manifest.json", Err: enospc}, true},
		// The syncs of relaxed durability.
		{"version dir sync (append)", store.ModeAppend, faultfs.Rule{Op: faultfs.Sync, Glob: "v*", Err: enospc}, false},
		{"version dir sync (write)", store.ModeWrite, faultfs.Rule{Op: faultfs.Sync, Glob: "v*", Err: enospc}, false},
		{"segment sync (append)", store.ModeAppend, faultfs.Rule{Op: faultfs.Sync, Glob: "*.ndjson", Err: enospc}, false},
		{"segment sync (write)", store.ModeWrite, faultfs.Rule{Op: faultfs.Sync, Glob: "*.ndjson", Err: enospc}, false},
		{"log dir sync (append)", store.ModeAppend, faultfs.Rule{Op: faultfs.Sync, Glob: ".log", Err: enospc}, true},
		{"log dir sync (write)", store.ModeWrite, faultfs.Rule{Op: faultfs.Sync, Glob: ".log", Err: enospc}, true},
		{"lock release (append)", store.ModeAppend, faultfs.Rule{Op: faultfs.Delete, Glob: "manifest.json.write_lock", Err: enospc}, false},
	}
	var fails []string
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			dir := t.TempDir()
			local, err := fsys.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			ffs := faultfs.New(local)
			s, err := store.Open(dir, store.WithFS(ffs))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			keys := []string{"disk", "full"}
			b0 := rowsBatch(0, 100, "base")
			if _, err := s.Put(ctx, keys, recordReader(b0), store.PutOptions{RequestID: "base"}); err != nil {
				t.Fatal(err)
			}
			b1 := rowsBatch(1000, 100, "failing")
			ffs.Add(tc.rule)
			_, err = s.Put(ctx, keys, recordReader(b1), store.PutOptions{Mode: tc.mode, RequestID: "r1"})
			hits := ffs.Injected(tc.rule.Op)
			ffs.Clear()
			if hits == 0 {
				t.Fatalf("fault never triggered (put err %v)", err)
			}
			ids := storeIDs(t, s, keys)
			visible := ids[1000]
			t.Logf("ENOSPC at %s: put error %v; failing rows visible %d", tc.name, err, visible)
			if err == nil {
				// Acknowledged despite the fault (the log head is a hint
				// written after the commit): its rows must be there once.
				if visible != 1 {
					t.Errorf("acknowledged put, rows visible %d times", visible)
				}
			} else {
				if !strings.Contains(err.Error(), "no space") {
					t.Errorf("error does not say the disk is full: %v", err)
				}
				switch {
				case tc.committed && visible != 1:
					t.Errorf("put committed before the fault (%v): its rows visible %d times, want once", err, visible)
				case !tc.committed && visible != 0:
					t.Errorf("BUG: put failed with ENOSPC (%v) but its rows are visible (%d times)", err, visible)
					fails = append(fails, tc.name)
				}
			}
			for id := int64(0); id < 100; id++ {
				if ids[id] != 1 {
					t.Fatalf("acknowledged row %d visible %d times", id, ids[id])
				}
			}
			vr, verr := maint.Verify(ctx, s, maint.VerifyOptions{})
			if verr != nil {
				t.Fatalf("verify: %v", verr)
			}
			for _, p := range vr.Problems {
				if p.Kind != "stale_temp" && p.Kind != "orphan" {
					t.Errorf("verify after ENOSPC: %s %s: %s", p.Kind, p.Path, p.Detail)
				}
			}
			if _, err := maint.Sweep(ctx, s, 0); err != nil {
				t.Errorf("sweep: %v", err)
			}
			// Space is back: the retry (same request id) succeeds once.
			if _, err := s.Put(ctx, keys, recordReader(b1), store.PutOptions{Mode: tc.mode, RequestID: "r1"}); err != nil {
				t.Fatalf("retry after ENOSPC: %v", err)
			}
			ids = storeIDs(t, s, keys)
			if ids[1000] != 1 || ids[1099] != 1 {
				t.Errorf("after the retry the put's rows are visible %d times", ids[1000])
			}
			// A new put goes through at once: no lock or claim of the
			// failed one is in its way.
			b2 := rowsBatch(2000, 10, "next")
			start := time.Now()
			if _, err := s.Put(ctx, keys, recordReader(b2), store.PutOptions{Mode: store.ModeAppend}); err != nil {
				t.Errorf("the next put: %v", err)
			} else if d := time.Since(start); d > 2*time.Second {
				t.Errorf("the next put took %v", d)
			}
			b2.Release()
			if vr, err := maint.Verify(ctx, s, maint.VerifyOptions{}); err != nil || !vr.OK {
				t.Errorf("verify after retry and sweep: %v %+v", err, vr)
			}
			b0.Release()
			b1.Release()
		})
	}
	report(t, "ENOSPC injection points=%d; failed puts left visible rows at: %v", len(cases), fails)
}
