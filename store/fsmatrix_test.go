package store_test

// The store's core protocol behaviours, run on each storage the store can
// sit on: a local directory and an S3 bucket (versitygw, started by
// internal/s3test). Each behaviour reaches storage only through the
// store and its fsys.FS, so that the same test proves the protocol on both.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/internal/s3test"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/maint"
)

// storage makes a fresh, empty fsys.FS for one subtest.
type storage struct {
	name string
	new  func(t *testing.T) fsys.FS
}

func storages(t *testing.T) []storage {
	srv := s3test.Start(t)
	return []storage{
		{"local", func(t *testing.T) fsys.FS {
			l, err := fsys.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		}},
		{"s3", func(t *testing.T) fsys.FS { return srv.FS(t) }},
	}
}

// TestProtocolOnEachFS runs the core behaviours on each storage.
func TestProtocolOnEachFS(t *testing.T) {
	behaviours := []struct {
		name string
		fn   func(t *testing.T, f fsys.FS)
	}{
		{"RoundTrip", fsRoundTrip},
		{"FirstAppendsConverge", fsFirstAppendsConverge},
		{"Linearizable", fsLinearizable},
		{"RequestIDOnce", fsRequestIDOnce},
		{"ChainAndSignatures", fsChainAndSignatures},
		{"MaintenanceClean", fsMaintenanceClean},
		{"TamperedLogDetected", fsTamperedLog},
		{"AbandonedWriteSwept", fsAbandonedWrite},
	}
	for _, st := range storages(t) {
		t.Run(st.name, func(t *testing.T) {
			for _, b := range behaviours {
				t.Run(b.name, func(t *testing.T) { b.fn(t, st.new(t)) })
			}
		})
	}
}

// openOn opens a store on f with a checked allocator that must be empty
// when the test ends.
func openOn(t *testing.T, f fsys.FS, opts ...store.Option) *store.Store {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	s, err := store.Open("test", append([]store.Option{store.WithFS(f), store.WithAllocator(mem), store.WithLockTimeout(20 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var idSchema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)

func idReader(vals ...int64) array.RecordReader {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(vals, nil)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(idSchema, []arrow.Array{col}, int64(len(vals)))
	defer rec.Release()
	rdr, err := array.NewRecordReader(idSchema, []arrow.RecordBatch{rec})
	if err != nil {
		panic(err)
	}
	return rdr
}

func putIDs(ctx context.Context, s *store.Store, mode store.Mode, keys []string, o store.PutOptions, vals ...int64) (*store.CommitRecord, error) {
	rdr := idReader(vals...)
	defer rdr.Release()
	o.Mode = mode
	return s.Put(ctx, keys, rdr, o)
}

func mustPutIDs(t *testing.T, s *store.Store, mode store.Mode, keys []string, vals ...int64) *store.CommitRecord {
	t.Helper()
	r, err := putIDs(t.Context(), s, mode, keys, store.PutOptions{}, vals...)
	if err != nil {
		t.Fatalf("%v %v: %v", mode, keys, err)
	}
	return r
}

// readIDsOf reads the id column of a version (store.Latest for the latest).
func readIDsOf(t *testing.T, s *store.Store, keys []string, version int) []int64 {
	t.Helper()
	rdr, err := s.Read(t.Context(), keys, store.ReadOptions{SnapshotOptions: store.SnapshotOptions{Version: version}})
	if err != nil {
		t.Fatalf("read %v v%d: %v", keys, version, err)
	}
	defer rdr.Release()
	var out []int64
	for rdr.Next() {
		out = append(out, rdr.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	if err := rdr.Err(); err != nil {
		t.Fatalf("read %v v%d: %v", keys, version, err)
	}
	return out
}

func verifyOK(t *testing.T, s *store.Store, o maint.VerifyOptions) *maint.VerifyReport {
	t.Helper()
	rep, err := maint.Verify(t.Context(), s, o)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("verify: %+v", rep.Problems)
	}
	return rep
}

func fsRoundTrip(t *testing.T, f fsys.FS) {
	s := openOn(t, f)
	k := []string{"sales", "orders"}
	r1 := mustPutIDs(t, s, store.ModeWrite, k, 1, 2, 3)
	mustPutIDs(t, s, store.ModeAppend, k, 4, 5)
	if got := readIDsOf(t, s, k, store.Latest); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("read %v", got)
	}
	r3 := mustPutIDs(t, s, store.ModeWrite, k, 10)
	if r3.Version == r1.Version {
		t.Fatalf("second write in %s too", r1.Version)
	}
	mustPutIDs(t, s, store.ModeAppend, k, 11)
	if got := readIDsOf(t, s, k, store.Latest); !slices.Equal(got, []int64{10, 11}) {
		t.Fatalf("latest %v", got)
	}
	v1, _ := store.ParseVersion(r1.Version)
	if got := readIDsOf(t, s, k, v1); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("%s: %v", r1.Version, got)
	}
	latest, vs, err := s.Versions(t.Context(), k)
	if err != nil || len(vs) != 2 {
		t.Fatalf("Versions = %d, %v, %v", latest, vs, err)
	}
	// A partitioned version: hive directories whose names need escaping.
	pk := []string{"sales", "by_region"}
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "region", Type: arrow.BinaryTypes.String}}, nil)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(`[{"id":1,"region":"eu west"},{"id":2,"region":"us/east"},{"id":3,"region":"eu west"},{"id":4,"region":"ü%"}]`))
	if err != nil {
		t.Fatal(err)
	}
	prdr, _ := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	rec.Release()
	pr, err := s.Write(t.Context(), pk, prdr, store.PutOptions{PartitionBy: []string{"region"}})
	prdr.Release()
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Files) != 3 {
		t.Errorf("partitioned write: %d files, want 3", len(pr.Files))
	}
	got := readIDsOf(t, s, pk, store.Latest)
	slices.Sort(got)
	if !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("partitioned read %v", got)
	}

	// A second store on the same storage (another server) sees it all.
	s2 := openOn(t, f)
	if got := readIDsOf(t, s2, k, store.Latest); !slices.Equal(got, []int64{10, 11}) {
		t.Fatalf("second store reads %v", got)
	}
	verifyOK(t, s, maint.VerifyOptions{})
}

// fsFirstAppendsConverge: clients appending to a profile that does not
// exist yet, through two stores (two servers), converge on one version
// and lose no acknowledged row.
func fsFirstAppendsConverge(t *testing.T, f fsys.FS) {
	stores := []*store.Store{openOn(t, f), openOn(t, f)}
	const clients, puts = 8, 3
	k := []string{"fresh", "profile"}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		versions = map[string]bool{}
	)
	for c := range clients {
		wg.Go(func() {
			for i := range puts {
				r, err := putIDs(t.Context(), stores[c%2], store.ModeAppend, k, store.PutOptions{}, int64(c*1000+i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				versions[r.Version] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(versions) != 1 {
		t.Fatalf("acknowledged appends landed in %d versions: %v", len(versions), versions)
	}
	got := readIDsOf(t, stores[0], k, store.Latest)
	slices.Sort(got)
	var want []int64
	for c := range clients {
		for i := range puts {
			want = append(want, int64(c*1000+i))
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read %d rows %v, want %v", len(got), got, want)
	}
}

// fsLinearizable: 8 appenders race 2 writers, spread over two stores. An
// append acknowledged after a write was acknowledged lands in that
// write's version or a later one; every acknowledged append is in the
// version its result names, once.
func fsLinearizable(t *testing.T, f fsys.FS) {
	stores := []*store.Store{openOn(t, f), openOn(t, f)}
	k := []string{"lin"}
	mustPutIDs(t, stores[0], store.ModeWrite, k, -1)
	type op struct {
		write      bool
		id         int64
		version    int
		start, end time.Time
	}
	var (
		mu  sync.Mutex
		ops []op
		wg  sync.WaitGroup
	)
	appends, writes := 12, 3
	if testing.Short() {
		appends, writes = 6, 2
	}
	run := func(s *store.Store, write bool, base int64, n int) {
		for i := range n {
			id := base + int64(i)
			mode := store.ModeAppend
			if write {
				mode = store.ModeWrite
			}
			st := time.Now()
			r, err := putIDs(t.Context(), s, mode, k, store.PutOptions{}, id)
			if err != nil {
				t.Error(err)
				return
			}
			v, _ := store.ParseVersion(r.Version)
			mu.Lock()
			ops = append(ops, op{write, id, v, st, time.Now()})
			mu.Unlock()
		}
	}
	for a := range 8 {
		wg.Go(func() { run(stores[a%2], false, int64(1000*(a+1)), appends) })
	}
	for w := range 2 {
		wg.Go(func() { run(stores[w%2], true, int64(100000*(w+1)), writes) })
	}
	wg.Wait()
	for _, w := range ops {
		for _, a := range ops {
			if w.write && !a.write && a.start.After(w.end) && a.version < w.version {
				t.Errorf("append %d started after write %d was acknowledged (v%d) but landed in v%d", a.id, w.id, w.version, a.version)
			}
		}
	}
	byVersion := map[int][]int64{}
	for _, a := range ops {
		if a.write {
			continue
		}
		if _, ok := byVersion[a.version]; !ok {
			byVersion[a.version] = readIDsOf(t, stores[0], k, a.version)
		}
		if n := count(byVersion[a.version], a.id); n != 1 {
			t.Errorf("append %d is %d times in v%d, which its result names", a.id, n, a.version)
		}
	}
	verifyOK(t, stores[1], maint.VerifyOptions{Keys: k})
}

func count(vals []int64, v int64) int {
	n := 0
	for _, x := range vals {
		if x == v {
			n++
		}
	}
	return n
}

// fsRequestIDOnce: racing retries of one request id, on two stores,
// commit once and all get the same record.
func fsRequestIDOnce(t *testing.T, f fsys.FS) {
	stores := []*store.Store{openOn(t, f), openOn(t, f)}
	k := []string{"idem"}
	recs := make([]*store.CommitRecord, 6)
	var wg sync.WaitGroup
	for i := range recs {
		wg.Go(func() {
			r, err := putIDs(t.Context(), stores[i%2], store.ModeAppend, k, store.PutOptions{RequestID: "job-1"}, 42)
			if err != nil {
				t.Error(err)
			}
			recs[i] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if got := readIDsOf(t, stores[0], k, store.Latest); !slices.Equal(got, []int64{42}) {
		t.Fatalf("rows %v, want [42]", got)
	}
	for _, r := range recs {
		if r.Seq != recs[0].Seq || r.Hash() != recs[0].Hash() {
			t.Fatalf("results differ: %+v vs %+v", r, recs[0])
		}
	}
}

// fsChainAndSignatures: records chain across versions and verify with
// the public key (and not with another).
func fsChainAndSignatures(t *testing.T, f fsys.FS) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	s := openOn(t, f, store.WithSigningKey(priv))
	k := []string{"chain"}
	mustPutIDs(t, s, store.ModeWrite, k, 1)
	mustPutIDs(t, s, store.ModeAppend, k, 2)
	mustPutIDs(t, s, store.ModeWrite, k, 3)
	var recs []*store.CommitRecord
	if err := s.Lineage(t.Context(), k, func(c *store.CommitRecord) error { recs = append(recs, c); return nil }); err != nil {
		t.Fatal(err)
	}
	prev := ""
	for i, r := range recs {
		if r.Seq != int64(i+1) || r.Prev != prev {
			t.Fatalf("record %d: seq %d prev %q, want %d %q", i, r.Seq, r.Prev, i+1, prev)
		}
		if err := r.VerifySignature(pub); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		prev = r.Hash()
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	rep := verifyOK(t, s, maint.VerifyOptions{PublicKey: pub})
	if len(rep.Heads) != 1 || rep.Heads[0].Seq != 3 || rep.Heads[0].Hash != recs[2].Hash() {
		t.Errorf("heads %+v", rep.Heads)
	}
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	rep, err := maint.Verify(t.Context(), s, maint.VerifyOptions{PublicKey: other})
	if err != nil || rep.OK || !hasProblem(rep, maint.ProblemSignature) {
		t.Errorf("verify with another key: %+v, %v", rep, err)
	}
}

func hasProblem(rep *maint.VerifyReport, kind string) bool {
	return slices.ContainsFunc(rep.Problems, func(p maint.Problem) bool { return p.Kind == kind })
}

// fsMaintenanceClean: after a life of writes, appends, a failed put and a
// killed writer's leftovers, verify is clean (but for the leftovers),
// sweep removes exactly the leftovers, retention retires old versions,
// and everything still reads and verifies.
func fsMaintenanceClean(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	s := openOn(t, f)
	k := []string{"m", "p"}
	r0 := mustPutIDs(t, s, store.ModeWrite, k, 1)
	mustPutIDs(t, s, store.ModeAppend, k, 2)
	mustPutIDs(t, s, store.ModeWrite, k, 3)
	r3 := mustPutIDs(t, s, store.ModeWrite, k, 4)
	mustPutIDs(t, s, store.ModeAppend, k, 5)
	// A put refused midway (a schema mismatch) leaves nothing.
	bad := array.NewStringBuilder(memory.DefaultAllocator)
	bad.Append("x")
	col := bad.NewArray()
	bad.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String}}, nil)
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, 1)
	col.Release()
	rdr, _ := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	rec.Release()
	if _, err := s.Append(ctx, k, rdr, store.PutOptions{}); !errors.Is(err, store.ErrSchemaMismatch) {
		t.Fatalf("mismatched append: %v", err)
	}
	rdr.Release()
	verifyOK(t, s, maint.VerifyOptions{})

	// What a writer killed before its commit leaves: an orphan data file
	// in the latest version (committed to storage, no record).
	latest, _ := store.ParseVersion(r3.Version)
	orphan := path.Join("m/p", store.VersionName(latest), "9.parquet")
	w, err := f.Create(ctx, orphan)
	if err != nil {
		t.Fatal(err)
	}
	// A Parquet file Quiver wrote: a copy of a committed one.
	src, _, err := f.ReadFile(ctx, path.Join("m/p", r3.Files[0].Path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(src); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := maint.Verify(ctx, s, maint.VerifyOptions{})
	if err != nil || rep.OK || !hasProblem(rep, maint.ProblemOrphan) {
		t.Fatalf("verify with an orphan: %+v, %v", rep, err)
	}
	sw, err := maint.Sweep(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(sw.Removed, orphan) || len(sw.Skipped) != 0 {
		t.Fatalf("sweep: %+v, want %s removed and nothing skipped", sw, orphan)
	}
	verifyOK(t, s, maint.VerifyOptions{})

	// Retention keeps the newest version only.
	rr, err := maint.RemoveOldVersions(ctx, s, k, 1, 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Removed) != 2 || len(rr.Kept) != 0 {
		t.Fatalf("retention: %+v, want 2 versions removed", rr)
	}
	if got := readIDsOf(t, s, k, store.Latest); !slices.Equal(got, []int64{4, 5}) {
		t.Fatalf("latest after retention: %v", got)
	}
	v0, _ := store.ParseVersion(r0.Version)
	if _, err := s.Read(ctx, k, store.ReadOptions{SnapshotOptions: store.SnapshotOptions{Version: v0}}); !errors.Is(err, store.ErrVersionNotFound) {
		t.Errorf("read of a retired version: %v, want ErrVersionNotFound", err)
	}
	if entries, err := f.List(ctx, path.Join("m/p", r0.Version)); err == nil {
		t.Errorf("retired %s still lists %+v", r0.Version, entries)
	}
	verifyOK(t, s, maint.VerifyOptions{})
	if sw, err := maint.Sweep(ctx, s, 0); err != nil || len(sw.Removed) != 0 || len(sw.Skipped) != 0 {
		t.Errorf("second sweep: %+v, %v; want nothing to do", sw, err)
	}
	// Appends go on after maintenance.
	mustPutIDs(t, s, store.ModeAppend, k, 6)
	if got := readIDsOf(t, s, k, store.Latest); !slices.Equal(got, []int64{4, 5, 6}) {
		t.Fatalf("latest after another append: %v", got)
	}
	verifyOK(t, s, maint.VerifyOptions{})
}

// fsTamperedLog: a forged segment (a record rewritten, even re-chained
// without the key) and a deleted one are detected by verify, and sweep
// then touches nothing in the profile.
func fsTamperedLog(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	s := openOn(t, f, store.WithSigningKey(priv))
	for _, p := range []string{"forged", "deleted"} {
		k := []string{p}
		mustPutIDs(t, s, store.ModeWrite, k, 1)
		mustPutIDs(t, s, store.ModeAppend, k, 2)
		mustPutIDs(t, s, store.ModeAppend, k, 3)
	}
	verifyOK(t, s, maint.VerifyOptions{PublicKey: pub})
	segments := func(p string) []string {
		entries, err := f.List(ctx, p+"/.log")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			if strings.HasSuffix(e.Name, ".ndjson") {
				out = append(out, p+"/.log/"+e.Name)
			}
		}
		if len(out) != 3 {
			t.Fatalf("%s: segments %v, want 3", p, out)
		}
		return out
	}
	// Forge: the second record names another writer (it still parses).
	seg := segments("forged")[1]
	b, _, err := f.ReadFile(ctx, seg)
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(b), `"writer":"`, `"writer":"mallory-`, 1)
	if forged == string(b) {
		t.Fatalf("segment %s has no writer field to forge: %s", seg, b)
	}
	if err := f.Delete(ctx, seg); err != nil {
		t.Fatal(err)
	}
	if err := f.CreateExclusive(ctx, seg, []byte(forged)); err != nil {
		t.Fatal(err)
	}
	// Delete the middle segment of the other profile.
	if err := f.Delete(ctx, segments("deleted")[1]); err != nil {
		t.Fatal(err)
	}
	rep, err := maint.Verify(ctx, s, maint.VerifyOptions{PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ path, kind string }{{"forged", maint.ProblemChain}, {"forged", maint.ProblemSignature}, {"deleted", maint.ProblemChain}} {
		if !slices.ContainsFunc(rep.Problems, func(p maint.Problem) bool {
			return p.Kind == want.kind && strings.HasPrefix(p.Path, want.path)
		}) {
			t.Errorf("verify did not report %s in %s: %+v", want.kind, want.path, rep.Problems)
		}
	}
	sw, err := maint.Sweep(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Removed) != 0 || len(sw.Skipped) < 2 {
		t.Errorf("sweep of tampered profiles: %+v; want nothing removed, both skipped", sw)
	}
}

// fsAbandonedWrite: a write in progress when its writer died (a local
// temp file; on S3 a multipart upload, billed until aborted) is reported
// by verify as a stale temp and removed by sweep.
func fsAbandonedWrite(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	s := openOn(t, f)
	k := []string{"abandoned"}
	r := mustPutIDs(t, s, store.ModeWrite, k, 1)
	w, err := f.Create(ctx, path.Join("abandoned", r.Version, "1.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	// More than one S3 part, so that an upload exists; never committed
	// nor aborted, as by a killed writer.
	if _, err := w.Write(make([]byte, 9<<20)); err != nil {
		t.Fatal(err)
	}
	if _, local := f.(*fsys.Local); !local {
		// Let the part in flight land: a part arriving after its upload
		// was aborted can bring the upload back (S3 says to abort again).
		time.Sleep(time.Second)
	}
	rep, err := maint.Verify(ctx, s, maint.VerifyOptions{StaleAfter: time.Nanosecond})
	if err != nil || !hasProblem(rep, "stale_temp") {
		t.Fatalf("verify: %+v, %v; want a stale temp", rep, err)
	}
	sw, err := maint.Sweep(ctx, s, 0)
	if err != nil || len(sw.Removed) != 1 || !fsys.IsTemp(path.Base(sw.Removed[0])) {
		t.Fatalf("sweep: %+v, %v; want the temp removed", sw, err)
	}
	verifyOK(t, s, maint.VerifyOptions{StaleAfter: time.Nanosecond})
	if got := readIDsOf(t, s, k, store.Latest); !slices.Equal(got, []int64{1}) {
		t.Fatalf("read %v", got)
	}
}
