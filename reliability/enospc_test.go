package reliability

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiverdb/quiver/store"
)

// faultFS wraps the local FS and fails with ENOSPC wherever fail says, the
// way a full disk does: on temp-file writes, on publishing, on exclusive
// creates and on mkdir.
type faultFS struct {
	store.FS
	mu   sync.Mutex
	fail func(op, name string) bool
	hits int
}

func (f *faultFS) should(op, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil && f.fail(op, name) {
		f.hits++
		return true
	}
	return false
}

func (f *faultFS) set(fn func(op, name string) bool) {
	f.mu.Lock()
	f.fail, f.hits = fn, 0
	f.mu.Unlock()
}

func enospc(op, name string) error {
	return fmt.Errorf("%s %s: %w", op, name, syscall.ENOSPC)
}

func (f *faultFS) CreateExclusive(name string, data []byte) error {
	if f.should("create", name) {
		return enospc("create", name)
	}
	return f.FS.CreateExclusive(name, data)
}

func (f *faultFS) Mkdir(name string) error {
	if f.should("mkdir", name) {
		return enospc("mkdir", name)
	}
	return f.FS.Mkdir(name)
}

func (f *faultFS) MkdirAll(name string) error {
	if f.should("mkdir", name) {
		return enospc("mkdir", name)
	}
	return f.FS.MkdirAll(name)
}

func (f *faultFS) CreateTemp(dir, suffix string) (store.TempFile, error) {
	if f.should("tempcreate", path.Join(dir, "x"+suffix)) {
		return nil, enospc("tempcreate", dir)
	}
	t, err := f.FS.CreateTemp(dir, suffix)
	if err != nil {
		return nil, err
	}
	return &faultTemp{TempFile: t, fs: f, suffix: suffix}, nil
}

type faultTemp struct {
	store.TempFile
	fs     *faultFS
	suffix string
}

func (t *faultTemp) Write(p []byte) (int, error) {
	if t.fs.should("write", t.Name()) {
		return 0, enospc("write", t.Name())
	}
	return t.TempFile.Write(p)
}

func (t *faultTemp) Publish(final string, replace, readOnly bool) error {
	if t.fs.should("publish", final) {
		return enospc("publish", final)
	}
	return t.TempFile.Publish(final, replace, readOnly)
}

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

// TestStoreENOSPC: a disk that fills up at each step of a put (data temp
// file, publishing it, claiming an index, the commit record, the manifest,
// the version dir, the request record). The put must fail and leave nothing
// visible (DESIGN.md §3: "a stream that fails commits nothing"), verify must
// report at most sweepable leftovers, and once space is back the same put
// (same request_id) must succeed with its rows visible exactly once.
func TestStoreENOSPC(t *testing.T) {
	requireStress(t)
	cases := []struct {
		name string
		mode store.Mode
		fail func(op, name string) bool
	}{
		{"data temp write", store.ModeAppend, func(op, n string) bool { return op == "write" && strings.HasSuffix(n, ".parquet.tmp") }},
		{"data temp create", store.ModeAppend, func(op, n string) bool { return op == "tempcreate" && strings.Contains(n, ".parquet") }},
		{"publish data file", store.ModeAppend, func(op, n string) bool { return op == "publish" && strings.HasSuffix(n, ".parquet") }},
		{"claim index", store.ModeAppend, func(op, n string) bool { return op == "create" && strings.HasSuffix(n, ".claim") }},
		{"commit record (append)", store.ModeAppend, func(op, n string) bool { return op == "create" && strings.HasSuffix(n, ".commit.json") }},
		{"request pending", store.ModeAppend, func(op, n string) bool { return op == "create" && strings.HasSuffix(n, ".pending") }},
		{"request done record", store.ModeAppend, func(op, n string) bool {
			return op == "create" && strings.Contains(n, ".requests/") && strings.HasSuffix(n, ".json")
		}},
		{"data temp write (write)", store.ModeWrite, func(op, n string) bool { return op == "write" && strings.HasSuffix(n, ".parquet.tmp") }},
		{"version dir", store.ModeWrite, func(op, n string) bool {
			return op == "mkdir" && strings.Contains(path.Base(n), "v") && !strings.Contains(n, ".requests")
		}},
		{"version info", store.ModeWrite, func(op, n string) bool {
			return op == "create" && strings.HasSuffix(n, ".version.json") || op == "tempcreate" && strings.Contains(n, ".version")
		}},
		{"commit record (write)", store.ModeWrite, func(op, n string) bool { return op == "create" && strings.HasSuffix(n, ".commit.json") }},
		{"manifest (write)", store.ModeWrite, func(op, n string) bool {
			return op == "tempcreate" && strings.HasSuffix(n, "x.json") || op == "publish" && strings.HasSuffix(n, "manifest.json")
		}},
	}
	var fails []string
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			var ffs *faultFS
			s, err := store.Open(t.TempDir(), store.WithFS(func(root string) store.FS {
				ffs = &faultFS{FS: store.NewLocalFS(root)}
				return ffs
			}))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			keys := []string{"disk", "full"}
			b0 := rowsBatch(0, 100, "base")
			if _, err := s.Put(ctx, keys, recordReader(b0), store.PutOptions{RequestID: "base"}); err != nil {
				t.Fatal(err)
			}
			b1 := rowsBatch(1000, 100, "failing")
			ffs.set(tc.fail)
			_, err = s.Put(ctx, keys, recordReader(b1), store.PutOptions{Mode: tc.mode, RequestID: "r1"})
			hits := ffs.hits
			ffs.set(nil)
			if hits == 0 {
				t.Fatalf("fault never triggered (put err %v)", err)
			}
			ids := storeIDs(t, s, keys)
			visible := ids[1000]
			t.Logf("ENOSPC at %s: put error %v; failing rows visible %d", tc.name, err, visible)
			if err == nil {
				// Acknowledged despite the fault (e.g. the request record is
				// best-effort): then its rows must be there exactly once.
				if visible != 1 {
					t.Errorf("acknowledged put, rows visible %d times", visible)
				}
			} else {
				if !strings.Contains(err.Error(), "no space") {
					t.Errorf("error does not say the disk is full: %v", err)
				}
				if visible != 0 {
					t.Errorf("BUG: put failed with ENOSPC (%v) but its rows are visible (%d times)", err, visible)
					fails = append(fails, tc.name)
				}
			}
			for id := int64(0); id < 100; id++ {
				if ids[id] != 1 {
					t.Fatalf("acknowledged row %d visible %d times", id, ids[id])
				}
			}
			vr, verr := s.Verify(ctx, store.VerifyOptions{})
			if verr != nil {
				t.Fatalf("verify: %v", verr)
			}
			for _, p := range vr.Problems {
				if p.Kind != "stale_temp" && p.Kind != "orphan" {
					t.Errorf("verify after ENOSPC: %s %s: %s", p.Kind, p.Path, p.Detail)
				}
			}
			if _, err := s.Sweep(ctx, 0); err != nil {
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
			if vr, err := s.Verify(ctx, store.VerifyOptions{}); err != nil || !vr.OK {
				t.Errorf("verify after retry and sweep: %v %+v", err, vr)
			}
			b0.Release()
			b1.Release()
		})
	}
	report(t, "ENOSPC injection points=%d; failed puts left visible rows at: %v", len(cases), fails)

}
