package maint_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/faultfs"
	"github.com/quiverdb/quiver/store/maint"
)

// objectFS is a local directory seen as object storage sees it: none of
// the optional interfaces (fsys.Relaxed: no staged links, no directory
// syncs), so the store takes the commit path it takes over S3.
type objectFS struct{ fsys.FS }

// TestLostAnswersRapid: puts through storage that fails one call now and
// then, some of them after doing what was asked (a request that landed
// whose answer was lost), with a client that retries every failed put with
// its request id until it is answered, as clients are told to. Whatever
// call fails, and whether it landed: each put's rows are in the profile
// exactly once (a write's replacing what was before, partitioned or
// not), compactions change no row, a read under a fault fails or is exact
// (never DATA_LOSS), one without is exact, and
// verify finds nothing wrong once sweep has removed what failed puts left.
func TestLostAnswersRapid(t *testing.T) {
	ops := []faultfs.Op{faultfs.CreateExclusive, faultfs.Commit, faultfs.Create, faultfs.Write,
		faultfs.ReadFile, faultfs.Replace, faultfs.Open, faultfs.Read, faultfs.Stat, faultfs.List,
		faultfs.Mkdir, faultfs.Delete}
	unavailable := fmt.Errorf("request failed: read: connection reset by peer: %w", fsys.ErrUnavailable)
	rapid.Check(t, func(rt *rapid.T) {
		local, err := fsys.NewLocal(t.TempDir())
		if err != nil {
			rt.Fatal(err)
		}
		var inner fsys.FS = objectFS{local}
		if rapid.Bool().Draw(rt, "local disk") {
			inner = local // (fsys.Relaxed: staged links, directory syncs)
		}
		ffs := faultfs.New(inner)
		fault := func() {
			ffs.Add(faultfs.Rule{
				Op:     rapid.SampledFrom(ops).Draw(rt, "op"),
				Err:    unavailable,
				Nth:    rapid.IntRange(1, 6).Draw(rt, "nth"),
				Landed: rapid.Bool().Draw(rt, "landed"),
			})
		}
		s, err := store.Open("test", store.WithFS(ffs), store.WithLockTimeout(2*time.Second))
		if err != nil {
			rt.Fatal(err)
		}
		ctx := context.Background()
		k := []string{"lost", "p"}
		var model []int64 // the profile's rows, as the client was told
		n := rapid.IntRange(1, 12).Draw(rt, "puts")
		for i := range n {
			mode := store.ModeAppend
			if i == 0 || rapid.IntRange(0, 4).Draw(rt, "write") == 0 {
				mode = store.ModeWrite
			}
			rows := make([]int64, rapid.IntRange(1, 3).Draw(rt, "rows"))
			var js []string
			for j := range rows {
				rows[j] = int64(i*10 + j)
				js = append(js, fmt.Sprintf(`{"id":%d,"region":%q}`, rows[j], rapid.SampledFrom([]string{"eu", "us", "jp"}).Draw(rt, "region")))
			}
			var by []string
			if mode == store.ModeWrite && rapid.Bool().Draw(rt, "partitioned") {
				by = []string{"region"}
			}
			id := fmt.Sprintf("r%d", i)
			var rec *store.CommitRecord
			for attempt := 0; ; attempt++ {
				if attempt < 3 && rapid.Bool().Draw(rt, "fault") {
					fault()
				}
				in := fromJSON(t, regionSchema, "["+strings.Join(js, ",")+"]")
				rec, err = s.Put(ctx, k, in, store.PutOptions{Mode: mode, RequestID: id, PartitionBy: by})
				in.Release()
				rt.Logf("put %s (%s) attempt %d: %v", id, mode, attempt, err)
				ffs.Clear()
				if err == nil {
					break
				}
				if attempt >= 4 {
					rt.Fatalf("put %s (%s): still failing without faults: %v", id, mode, err)
				}
			}
			if rec.Replayed && rec.Rows != int64(len(rows)) {
				rt.Fatalf("put %s replayed with %d rows, want %d", id, rec.Rows, len(rows))
			}
			if mode == store.ModeWrite {
				model = nil
			}
			model = append(model, rows...)
			want := slices.Sorted(slices.Values(model))
			if rapid.IntRange(0, 3).Draw(rt, "compact") == 0 {
				// Compaction: the same rows, whatever it was told (it
				// has no request id: one that failed may have committed,
				// and is not retried).
				fault()
				_, err := s.Compact(ctx, k, store.CompactOptions{})
				rt.Logf("compact after %s: %v", id, err)
				ffs.Clear()
			}
			// A read under a fault fails or is exact; one without is
			// exact.
			fault()
			got, err := readRows(s, k)
			ffs.Clear()
			if err == nil {
				if slices.Sort(got); !slices.Equal(got, want) {
					rt.Fatalf("read under a fault after put %s (%s): the profile holds %v, want %v", id, mode, got, want)
				}
			} else if ce := (*store.CorruptionError)(nil); errors.Is(err, store.ErrDataLoss) ||
				!errors.Is(err, fsys.ErrUnavailable) && !errors.Is(err, store.ErrUnavailable) || errors.As(err, &ce) && !errors.Is(err, fsys.ErrUnavailable) {
				rt.Fatalf("read under a fault after put %s: %v, want the storage's unavailability", id, err)
			}
			got, err = readRows(s, k)
			if err != nil {
				rt.Fatalf("read after put %s: %v", id, err)
			}
			if slices.Sort(got); !slices.Equal(got, want) {
				rt.Fatalf("after put %s (%s): the profile holds %v, want %v", id, mode, got, want)
			}
		}
		sw, err := maint.Sweep(ctx, s, 0)
		if err != nil {
			rt.Fatalf("sweep: %v", err)
		}
		rt.Logf("sweep: %+v", sw)
		rep, err := maint.Verify(ctx, s, maint.VerifyOptions{})
		if err != nil || !rep.OK {
			rt.Fatalf("verify: %+v, %v", rep, err)
		}
	})
}

// readRows reads the latest version's id column.
func readRows(s *store.Store, k []string) ([]int64, error) {
	rdr, err := s.Read(context.Background(), k, store.ReadOptions{SnapshotOptions: store.SnapshotOptions{Version: store.Latest}, Columns: []string{"id"}})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	var out []int64
	for rdr.Next() {
		c := rdr.RecordBatch().Column(0)
		for j := 0; j < c.Len(); j++ {
			v, ok := c.(interface{ Value(int) int64 })
			if !ok {
				return nil, errors.New("id is not int64")
			}
			out = append(out, v.Value(j))
		}
	}
	return out, rdr.Err()
}

// TestLostAnswersConcurrent: two stores (two servers) on one directory,
// each through storage that fails one call now and then (some after doing
// it), append concurrently with request ids and retry as clients are
// told to, while compactions run: every acknowledged append's rows are in
// the profile exactly once, and sweep and verify leave nothing wrong.
func TestLostAnswersConcurrent(t *testing.T) {
	ops := []faultfs.Op{faultfs.CreateExclusive, faultfs.Commit, faultfs.Create, faultfs.Write,
		faultfs.ReadFile, faultfs.Replace, faultfs.Open, faultfs.Stat, faultfs.List, faultfs.Delete}
	unavailable := fmt.Errorf("request failed: read: connection reset by peer: %w", fsys.ErrUnavailable)
	seeds := 4
	if testing.Short() {
		seeds = 2
	}
	if n, err := strconv.Atoi(os.Getenv("QUIVER_LOST_SEEDS")); err == nil && n > 0 {
		seeds = n // (longer runs)
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			dir := t.TempDir()
			k := []string{"lost", "c"}
			var stores [2]*store.Store
			var ffss [2]faultfs.FS
			for i := range stores {
				local, err := fsys.NewLocal(dir)
				if err != nil {
					t.Fatal(err)
				}
				var inner fsys.FS = objectFS{local}
				if (seed+i)%2 == 1 {
					inner = local
				}
				ffss[i] = faultfs.New(inner)
				if stores[i], err = store.Open(fmt.Sprint("s", i), store.WithFS(ffss[i]), store.WithLockTimeout(5*time.Second)); err != nil {
					t.Fatal(err)
				}
				defer stores[i].Close()
			}
			ctx := context.Background()
			in := ids(-1)
			if _, err := stores[0].Put(ctx, k, in, store.PutOptions{Mode: store.ModeWrite, RequestID: "w"}); err != nil {
				t.Fatal(err)
			}
			in.Release()
			const perWriter = 25
			var (
				mu   sync.Mutex
				want = []int64{-1}
				errs []error
				wg   sync.WaitGroup
			)
			for w := range 4 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(seed), uint64(w)))
					s, ffs := stores[w%2], ffss[w%2]
					for i := range perWriter {
						id := fmt.Sprintf("w%d-%d", w, i)
						row := int64(w*1000 + i)
						for attempt := 0; ; attempt++ {
							if attempt < 3 && rng.IntN(3) == 0 {
								ffs.Add(faultfs.Rule{Op: ops[rng.IntN(len(ops))], Err: unavailable, Nth: 1 + rng.IntN(4), Landed: rng.IntN(2) == 0})
							}
							in := ids(row)
							_, err := s.Put(ctx, k, in, store.PutOptions{Mode: store.ModeAppend, RequestID: id, Writer: fmt.Sprint("writer", w)})
							in.Release()
							if err == nil {
								break
							}
							if attempt >= 8 {
								mu.Lock()
								errs = append(errs, fmt.Errorf("append %s: still failing: %w", id, err))
								mu.Unlock()
								return
							}
						}
						mu.Lock()
						want = append(want, row)
						mu.Unlock()
					}
				})
			}
			wg.Go(func() { // compactions, clean
				for range 3 {
					time.Sleep(30 * time.Millisecond)
					_, _ = stores[1].Compact(ctx, k, store.CompactOptions{})
				}
			})
			wg.Wait()
			for _, e := range errs {
				t.Error(e)
			}
			injected := 0
			for _, f := range ffss {
				f.Clear()
				for _, op := range ops {
					injected += f.Injected(op)
				}
			}
			t.Logf("%d calls failed", injected)
			got, err := readRows(stores[0], k)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("the profile holds %d rows %v,\nwant %d %v", len(got), got, len(want), want)
			}
			if _, err := maint.Sweep(ctx, stores[0], 0); err != nil {
				t.Fatalf("sweep: %v", err)
			}
			rep, err := maint.Verify(ctx, stores[0], maint.VerifyOptions{})
			if err != nil || !rep.OK {
				t.Fatalf("verify: %+v, %v", rep, err)
			}
		})
	}
}
