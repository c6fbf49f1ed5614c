package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/faultfs"
)

// Regressions found by the pyarrow suite (integration/test_types.py): puts
// that were accepted but left a version no read could convert back.
func TestRoundTripTypesParquetDoesNotKeep(t *testing.T) {
	jsonType, err := extensions.NewJSONType(arrow.BinaryTypes.String)
	if err != nil {
		t.Fatal(err)
	}
	sortedMap := arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64)
	sortedMap.KeysSorted = true
	cases := []struct {
		name string
		dt   arrow.DataType
		rows string
	}{
		{"map keys_sorted", sortedMap, `[{"c":[{"key":"a","value":1}]},{"c":null}]`},
		{"dictionary<int64>", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.PrimitiveTypes.Int64}, `[{"c":7},{"c":null},{"c":7}]`},
		{"arrow.json extension", jsonType, `[{"c":"{\"a\":1}"},{"c":null}]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newTestStore(t)
			sc := arrow.NewSchema([]arrow.Field{{Name: "c", Type: c.dt, Nullable: true}}, nil)
			in, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(c.rows))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Release()
			rdr, _ := array.NewRecordReader(sc, []arrow.RecordBatch{in})
			put(t, s, ModeWrite, []string{"t"}, rdr, PutOptions{})
			out, err := s.Read(context.Background(), []string{"t"}, latest)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Release()
			if !out.Next() {
				t.Fatalf("no batch: %v", out.Err())
			}
			got := out.RecordBatch()
			if !got.Schema().Equal(sc) || !array.Equal(got.Column(0), in.Column(0)) {
				t.Fatalf("got %s %v, want %s %v", got.Schema(), got.Column(0), sc, in.Column(0))
			}
		})
	}
}

func TestDictionaryOfLargeStrings(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.LargeString}
	vb := array.NewLargeStringBuilder(memory.DefaultAllocator)
	vb.AppendValues([]string{"x", "y"}, nil)
	vals := vb.NewArray()
	vb.Release()
	ib := array.NewInt32Builder(memory.DefaultAllocator)
	ib.AppendValues([]int32{1, 0, 1}, []bool{true, false, true})
	idx := ib.NewArray()
	ib.Release()
	col := array.NewDictionaryArray(dt, idx, vals)
	idx.Release()
	vals.Release()
	defer col.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: "c", Type: dt, Nullable: true}}, nil)
	in := array.NewRecordBatch(sc, []arrow.Array{col}, 3)
	defer in.Release()
	rdr, _ := array.NewRecordReader(sc, []arrow.RecordBatch{in})
	put(t, s, ModeWrite, []string{"d"}, rdr, PutOptions{})
	out, err := s.Read(ctx, []string{"d"}, latest)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if !out.Next() || !out.Schema().Equal(sc) || out.RecordBatch().Column(0).ValueStr(0) != "y" || !out.RecordBatch().Column(0).IsNull(1) {
		t.Fatalf("got %v %v", out.Schema(), out.Err())
	}
}

func TestZeroColumnsKeepTheirRows(t *testing.T) {
	s, _ := newTestStore(t)
	sc := arrow.NewSchema(nil, nil)
	rec := array.NewRecordBatch(sc, nil, 3)
	defer rec.Release()
	rdr, _ := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	c := put(t, s, ModeWrite, []string{"z"}, rdr, PutOptions{})
	out, err := s.Read(context.Background(), []string{"z"}, latest)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	var n int64
	for out.Next() {
		n += out.RecordBatch().NumRows()
	}
	if err := out.Err(); err != nil {
		t.Fatalf("read: %v", err)
	}
	if c.Rows != 3 || n != 3 {
		t.Fatalf("committed %d rows, read %d", c.Rows, n)
	}
}

func TestCSVWholeFloatsStayFloats(t *testing.T) {
	s, dir := newTestStore(t)
	sc := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	put(t, s, ModeWrite, []string{"f"}, fromJSON(t, sc, `[{"x":1},{"x":-0.5},{"x":2.5},{"x":1e300}]`), PutOptions{Format: "csv"})
	b, _ := os.ReadFile(filepath.Join(dir, "f", "v0", "0.csv"))
	if string(b) != "x\n1.0\n-0.5\n2.5\n1e+300\n" {
		t.Fatalf("csv %q", b)
	}
	got, _ := readAll(t, s, []string{"f"}, latest)
	if got.Field(0).Type.ID() != arrow.FLOAT64 {
		t.Fatalf("inferred %s", got.Field(0).Type)
	}
}

func TestMaxPutBytesCountsWhatWasSent(t *testing.T) {
	s, dir := newTestStore(t, WithMaxPutBytes(1000))
	put(t, s, ModeWrite, []string{"t"}, ids(1), PutOptions{})
	vals := make([]int64, 1000) // 8 kB of int64s
	for _, mode := range []Mode{ModeAppend, ModeWrite} {
		before := hashTree(t, dir)
		rdr := ids(vals...)
		_, err := s.Put(context.Background(), []string{"t"}, rdr, PutOptions{Mode: mode})
		rdr.Release()
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s: got %v", mode, err)
		}
		// The append's claim is removed with its file: nothing changed.
		assertOnlyClaims(t, before, hashTree(t, dir), 0)
	}
}

// A fixed_size_list with a null slot between valid ones: arrow-go before
// v18.9 could not write it ("non-zero length null components"), and the
// put was refused as unstorable; now it is stored and read back as sent.
func TestFixedSizeListNullSlotRoundTrips(t *testing.T) {
	s, _ := newTestStore(t)
	sc := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int64), Nullable: true}}, nil)
	const rows = `[{"l":[1,2]},{"l":null},{"l":[3,4]}]`
	put(t, s, ModeWrite, []string{"new", "profile"}, fromJSON(t, sc, rows), PutOptions{})
	if _, got := readAll(t, s, []string{"new", "profile"}, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}}); got != rows {
		t.Fatalf("read %s, want %s", got, rows)
	}
}

// drainCounter counts the batches a put consumed.
type drainCounter struct {
	array.RecordReader
	n int
}

func (d *drainCounter) Next() bool {
	ok := d.RecordReader.Next()
	if ok {
		d.n++
	}
	return ok
}

func TestReplayedPutConsumesTheStream(t *testing.T) {
	s, _ := newTestStore(t)
	put(t, s, ModeAppend, []string{"t"}, ids(1), PutOptions{RequestID: "r"})
	inner := ids(1)
	defer inner.Release()
	dc := &drainCounter{RecordReader: inner}
	c, err := s.Append(context.Background(), []string{"t"}, dc, PutOptions{RequestID: "r"})
	if err != nil || !c.Replayed || dc.n != 1 {
		t.Fatalf("replay %+v %v, consumed %d batches", c, err, dc.n)
	}
}

func TestVersionsOfPyrosomeHaveNoZeroTimes(t *testing.T) {
	s, dir := newTestStore(t)
	copyTree(t, pyrosomeFixture, dir)
	_, vs, err := s.Versions(context.Background(), []string{"sales", "orders"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(vs)
	if strings.Contains(string(b), "0001-01-01") {
		t.Fatalf("zero times: %s", b)
	}
}

// copyQuiverFile writes rows as a Quiver data file (a real put's file,
// footer and all, with request id) at dst, as a put killed before its
// commit leaves it; the scratch profile it was made in is removed.
func copyQuiverFile(t *testing.T, s *Store, dir, dst string, requestID string, vals ...int64) {
	t.Helper()
	scratch := []string{"scratch", fmt.Sprintf("p%d", time.Now().UnixNano())}
	put(t, s, ModeWrite, scratch, ids(vals...), PutOptions{RequestID: requestID})
	b, err := os.ReadFile(filepath.Join(dir, scratch[0], scratch[1], "v0", "0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, scratch[0])); err != nil {
		t.Fatal(err)
	}
}

// A put killed after writing its files but before its commit leaves a
// claim and a data file under its final name: invisible to readers, and
// the client's retry with the same request id writes the rows once, in a
// new index (the reliability kill test once found such rows read twice).
func TestRetryAfterUncommittedPutWritesOnce(t *testing.T) {
	s, dir := newTestStore(t)
	ctx := context.Background()
	k := []string{"r"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	// What the killed append left: its claim and its file.
	if err := os.WriteFile(filepath.Join(dir, "r", "v0", claimName(1, FormatParquet)), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	copyQuiverFile(t, s, dir, filepath.Join(dir, "r", "v0", "1.parquet"), "job-9", 2, 3)
	if _, rows := readAll(t, s, k, latest); rows != `[{"id":1}]` {
		t.Fatalf("an uncommitted file is visible: %s", rows)
	}
	rdr := ids(2, 3)
	defer rdr.Release()
	c, err := s.Append(ctx, k, rdr, PutOptions{RequestID: "job-9", Metadata: []byte(`{"run":1}`)})
	if err != nil || c.Replayed || c.Version != "v0" || c.Index != 2 || c.Rows != 2 {
		t.Fatalf("retry: %+v %v", c, err)
	}
	if _, rows := readAll(t, s, k, latest); rows != `[{"id":1},{"id":2},{"id":3}]` {
		t.Fatalf("rows %s", rows)
	}
	in, err := s.Inspect(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Versions) != 1 || len(in.Versions[0].Orphans) != 1 || in.Versions[0].Orphans[0].Name != "r/v0/1.parquet" {
		t.Fatalf("the killed put's file is not an orphan: %+v", in.Versions)
	}
	// A second retry is answered from the log.
	rdr2 := ids(2, 3)
	defer rdr2.Release()
	c2, err := s.Append(ctx, k, rdr2, PutOptions{RequestID: "job-9"})
	if err != nil || !c2.Replayed || c2.Seq != c.Seq || string(c2.Line()) != string(c.Line()) {
		t.Fatalf("second retry: %+v %v", c2, err)
	}
}

// A write committed to the log whose manifest move fails is answered with
// ErrUnavailable (committed; the manifest lags); readers already see it (a
// committed write is never hidden by a lagging manifest); the retry with
// its request id is answered from the log and moves the manifest.
func TestManifestMoveFailureRetried(t *testing.T) {
	dir := t.TempDir()
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ff := faultfs.New(l)
	s, _ := newTestStore(t, WithFS(ff))
	k := []string{"m"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	ff.Add(faultfs.Rule{Op: faultfs.Replace, Glob: manifestName, Err: syscall.EIO})
	rdr := ids(2)
	_, err = s.Write(context.Background(), k, rdr, PutOptions{RequestID: "w-2"})
	rdr.Release()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	if _, rows := readAll(t, s, k, latest); rows != `[{"id":2}]` {
		t.Fatalf("latest before the retry: %s", rows)
	}
	ff.Clear()
	c := put(t, s, ModeWrite, k, ids(2), PutOptions{RequestID: "w-2"})
	if !c.Replayed || c.Version != "v1" {
		t.Fatalf("retry: %+v", c)
	}
	if _, rows := readAll(t, s, k, latest); rows != `[{"id":2}]` {
		t.Fatalf("latest after the retry: %s", rows)
	}
	// A failed HEAD marker is no failure: it only lags.
	ff.Add(faultfs.Rule{Op: faultfs.Replace, Glob: headName, Err: syscall.EIO})
	put(t, s, ModeAppend, k, ids(3), PutOptions{})
	ff.Clear()
	put(t, s, ModeAppend, k, ids(4), PutOptions{})
	in, err := s.Inspect(context.Background(), k)
	if err != nil || len(in.LogProblems) > 0 || len(in.Log) != 4 {
		t.Fatalf("inspect: %+v %v", in, err)
	}
}

// A version directory a killed write reserved and never committed is not a
// version: not listed, and reading it is NotFound, not a projection error.
func TestAbandonedVersionIsNotAVersion(t *testing.T) {
	s, dir := newTestStore(t)
	ctx := context.Background()
	put(t, s, ModeWrite, []string{"a"}, ids(1), PutOptions{})
	if err := os.Mkdir(filepath.Join(dir, "a", "v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	put(t, s, ModeWrite, []string{"a"}, ids(2), PutOptions{}) // v2
	latestV, vs, err := s.Versions(ctx, []string{"a"})
	if err != nil || latestV != 2 || len(vs) != 2 || vs[1].Version != "v2" {
		t.Fatalf("versions %d %+v %v", latestV, vs, err)
	}
	_, err = s.Read(ctx, []string{"a"}, ReadOptions{SnapshotOptions: SnapshotOptions{Version: 1}, Columns: []string{"id"}})
	if !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("read of an abandoned version: %v", err)
	}
}

// A write killed after writing its files but before its commit, later
// overtaken by another write, is still not a version: its rows are
// nobody's (the kill test once found them read twice).
func TestUncommittedWriteBelowLatestIsNotAVersion(t *testing.T) {
	s, dir := newTestStore(t)
	ctx := context.Background()
	k := []string{"w"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	// v1 as the killed write left it: .version.json and its file, no record.
	vi, err := os.ReadFile(filepath.Join(dir, "w", "v0", versionInfoName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "w", "v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "w", "v1", versionInfoName), vi, 0o444); err != nil {
		t.Fatal(err)
	}
	copyQuiverFile(t, s, dir, filepath.Join(dir, "w", "v1", "0.parquet"), "", 2)
	put(t, s, ModeWrite, k, ids(3), PutOptions{})
	latestV, vs, err := s.Versions(ctx, k)
	if err != nil || latestV != 2 || len(vs) != 2 || vs[0].Version != "v0" || vs[1].Version != "v2" {
		t.Fatalf("versions %d %+v %v", latestV, vs, err)
	}
	if _, err := s.Read(ctx, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: 1}}); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("read v1: %v", err)
	}
	var recs []string
	if err := s.Lineage(ctx, k, func(c *CommitRecord) error { recs = append(recs, c.Version); return nil }); err != nil || strings.Join(recs, " ") != "v0 v2" {
		t.Fatalf("lineage %v %v", recs, err)
	}
}

// A write killed between its commit and the manifest move: the retry finds
// the record and moves the manifest.
func TestReplayedWriteMovesTheManifest(t *testing.T) {
	s, dir := newTestStore(t)
	ctx := context.Background()
	k := []string{"m"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	put(t, s, ModeWrite, k, ids(2), PutOptions{RequestID: "w-2"})
	if err := os.WriteFile(filepath.Join(dir, "m", manifestName), encodeManifest(0), 0o644); err != nil {
		t.Fatal(err)
	}
	// Another server, which has not seen the write, serves the retry.
	other, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rdr := ids(2)
	defer rdr.Release()
	c, err := other.Write(ctx, k, rdr, PutOptions{RequestID: "w-2"})
	if err != nil || !c.Replayed || c.Version != "v1" {
		t.Fatalf("replay %+v %v", c, err)
	}
	if _, rows := readAll(t, s, k, latest); rows != `[{"id":2}]` {
		t.Fatalf("latest after replay: %s", rows)
	}
	if got, err := readManifestFile(filepath.Join(dir, "m")); err != nil || got != 1 {
		t.Fatalf("manifest v%d %v", got, err)
	}
}

func readManifestFile(pdir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(pdir, manifestName))
	if err != nil {
		return 0, err
	}
	return parseManifest(b, profile{dir: "x"})
}

// A killed process its parent has not reaped yet (a zombie) owns nothing:
// the kill test's clients once waited minutes on the locks of such
// servers.
func TestZombieOwnerIsDead(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	pid := cmd.Process.Pid
	if _, alive := (linuxProcs{}).startTime(pid); !alive {
		t.Fatal("a running process is not alive")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, alive := (linuxProcs{}).startTime(pid); !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a killed, unreaped process still counts as alive")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Wait()
}

// hookFS calls onRead before each ReadFile whose name matches glob (the
// last element), so that a test can slip another client's commit into a
// precise moment of an operation.
type hookFS struct {
	fsys.FS
	glob   string
	mu     sync.Mutex
	onRead func(name string)
	onMake func(name string)
}

func (h *hookFS) ReadFile(ctx context.Context, name string) ([]byte, fsys.Token, error) {
	h.mu.Lock()
	fn := h.onRead
	h.mu.Unlock()
	if ok, _ := path.Match(h.glob, path.Base(name)); ok && fn != nil {
		fn(name)
	}
	return h.FS.ReadFile(ctx, name)
}

func (h *hookFS) CreateExclusive(ctx context.Context, name string, data []byte) error {
	err := h.FS.CreateExclusive(ctx, name, data)
	h.mu.Lock()
	fn := h.onMake
	h.mu.Unlock()
	if ok, _ := path.Match(h.glob, path.Base(name)); ok && fn != nil && err == nil {
		fn(name)
	}
	return err
}

// hookedPair opens a test store whose file system calls hook (glob
// matching the names it watches) and another store on the same data
// directory: two servers, one of them observed.
func hookedPair(t *testing.T, glob string, otherOpts ...Option) (*hookFS, *Store, *Store) {
	t.Helper()
	dir := t.TempDir()
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	hook := &hookFS{FS: l, glob: glob}
	s, _ := newTestStore(t, WithFS(hook))
	other, err := Open(dir, otherOpts...)
	if err != nil {
		t.Fatal(err)
	}
	return hook, s, other
}

// TestInspectDuringCommitSeesNoBreak: a commit landing while Inspect reads
// the log (after it listed the segments, before it read .log/HEAD) is not
// a break in the chain. Found by the multi-process test, whose concurrent
// sweeper refused the profile as "records were removed from its end".
func TestInspectDuringCommitSeesNoBreak(t *testing.T) {
	hook, s, other := hookedPair(t, headName)
	k := []string{"busy"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	fired := false
	hook.onRead = func(string) {
		if fired {
			return
		}
		fired = true
		put(t, other, ModeAppend, k, ids(2), PutOptions{}) // another server commits now
	}
	in, err := s.Inspect(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if !fired {
		t.Fatal("the hook never ran")
	}
	if len(in.LogProblems) > 0 {
		t.Fatalf("a commit during Inspect reads as a broken chain: %v", in.LogProblems)
	}
}

// TestAppendConvergesUnderBackToBackWrites: an append whose version is
// superseded by a write between its staging and its commit, every time it
// tries, still commits (into the latest version) instead of failing with
// ErrUnavailable after a few rounds. Found by the multi-process test,
// where two writer processes writing back to back made 1 or 2 of 800
// appends fail "changed 9 times while the put was being committed".
func TestAppendConvergesUnderBackToBackWrites(t *testing.T) {
	hook, s, writer := hookedPair(t, "*.claim", WithLockTimeout(10*time.Second))
	k := []string{"hot"}
	put(t, s, ModeWrite, k, ids(0), PutOptions{})
	var writes int
	// A write the hook stopped waiting for still runs: wait for it before
	// the temp dir is removed.
	var bg sync.WaitGroup
	defer bg.Wait()
	// Each time the append claims its index (it has staged into the
	// latest version), another server writes a new version. The write
	// gets up to 300 ms: an append that commits holding the lock makes it
	// wait, and then the hook lets the append go on.
	hook.onMake = func(string) {
		if writes >= 2*maxRetarget {
			return
		}
		done := make(chan error, 1)
		bg.Add(1)
		go func() {
			defer bg.Done()
			rdr := ids(int64(100 + writes))
			defer rdr.Release()
			_, err := writer.Write(context.Background(), k, rdr, PutOptions{})
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
			writes++
		case <-time.After(300 * time.Millisecond):
			writes = 2 * maxRetarget
		}
	}
	rdr := ids(7)
	defer rdr.Release()
	c, err := s.Append(context.Background(), k, rdr, PutOptions{})
	if err != nil {
		t.Fatalf("after %d writes between its staging and its commit, the append failed: %v", writes, err)
	}
	// A write the hook stopped waiting for may commit after the append:
	// wait for it, then check the append against the log. It landed in
	// the version that was the latest when it committed, and that version
	// holds its row.
	bg.Wait()
	latestThen := -1
	lv := s.state(profile{keys: k, dir: "hot"})
	lv.mu.Lock()
	for _, r := range lv.log.records {
		if r.Seq < c.Seq && r.Mode == ModeWrite {
			latestThen = max(latestThen, r.version())
		}
	}
	lv.mu.Unlock()
	v, _ := parseVersionDir(c.Version)
	if got := readIDs(t, s, k, v); v != latestThen || !containsID(got, 7) {
		t.Fatalf("append landed in %s (the latest when it committed: %s), which holds %v", c.Version, VersionName(latestThen), got)
	}
}

func containsID(ids []int64, id int64) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

// TestHugeMetadataRefused (red team F11): a metadata file grown to
// gigabytes (sparse: no disk used) is refused before it is read, instead
// of costing that much memory. Reads and puts fail on what they need (the
// manifest, a version's .version.json, the profile marker), and on a
// .log/HEAD that is there but cannot be a head (no crash makes one: it is
// refused as altered, DATA_LOSS, and still ErrTooLarge).
func TestHugeMetadataRefused(t *testing.T) {
	for _, c := range []struct {
		name     string
		mustFail bool
	}{{"manifest.json", true}, {"v0/.version.json", true}, {".quiver.kind", false}, {".log/HEAD", true}} {
		t.Run(c.name, func(t *testing.T) {
			s, dir := newTestStore(t)
			put(t, s, ModeWrite, []string{"t", "p"}, ids(1), PutOptions{})
			put(t, s, ModeAppend, []string{"t", "p"}, ids(2), PutOptions{})
			if err := os.Truncate(filepath.Join(dir, "t", "p", filepath.FromSlash(c.name)), 3<<30); err != nil {
				t.Fatal(err)
			}
			s2, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, rerr := s2.Read(context.Background(), []string{"t", "p"}, latest)
			rdr := ids(3)
			_, perr := s2.Put(context.Background(), []string{"t", "p"}, rdr, PutOptions{})
			rdr.Release()
			_, ierr := s2.Inspect(context.Background(), []string{"t", "p"})
			runtime.ReadMemStats(&after)
			if d := after.TotalAlloc - before.TotalAlloc; d > 1<<30 {
				t.Errorf("allocated %d MiB", d>>20)
			}
			for what, err := range map[string]error{"read": rerr, "put": perr, "inspect": ierr} {
				switch {
				case err == nil && c.mustFail && what != "inspect":
					t.Errorf("%s: no error", what)
				case err != nil && !errors.Is(err, fsys.ErrTooLarge):
					t.Errorf("%s: %v, want fsys.ErrTooLarge", what, err)
				}
			}
		})
	}
}

// panicReader panics on its second batch, as a bug in a decoder might.
type panicReader struct {
	array.RecordReader
	n int
}

func (r *panicReader) Next() bool {
	r.n++
	if r.n == 2 {
		panic("decoder bug")
	}
	return r.RecordReader.Next()
}

// TestPanicInPutCleansUp (red team F10): a panic while a put is written
// fails that put like an error: its files and directories are removed,
// first put or append, and the store goes on serving.
func TestPanicInPutCleansUp(t *testing.T) {
	s, dir := newTestStore(t)
	before := hashTree(t, dir)
	for _, mode := range []Mode{ModeWrite, ModeAppend} {
		rdr := &panicReader{RecordReader: ids(1, 2)}
		_, err := s.Put(context.Background(), []string{"q", "r"}, rdr, PutOptions{Mode: mode})
		rdr.Release()
		var pe *PanicError
		if !errors.As(err, &pe) || pe.Value != "decoder bug" || !strings.Contains(string(pe.Stack), "panicReader") {
			t.Fatalf("%s: %v", mode, err)
		}
		assertUnchanged(t, before, hashTree(t, dir))
	}
	put(t, s, ModeWrite, []string{"q", "r"}, ids(1), PutOptions{})
	before = hashTree(t, dir)
	rdr := &panicReader{RecordReader: ids(1, 2)}
	if _, err := s.Put(context.Background(), []string{"q", "r"}, rdr, PutOptions{}); err == nil {
		t.Fatal("append: no error")
	}
	rdr.Release()
	assertUnchanged(t, before, hashTree(t, dir))
	put(t, s, ModeAppend, []string{"q", "r"}, ids(2), PutOptions{})
	if _, rows := readAll(t, s, []string{"q", "r"}, latest); rows != `[{"id":1},{"id":2}]` {
		t.Fatalf("rows %s", rows)
	}
}

// gateReader sends its first batch, then waits for release before the
// rest.
type gateReader struct {
	array.RecordReader
	n       atomic.Int32
	release chan struct{}
}

func (r *gateReader) Next() bool {
	if r.n.Add(1) == 2 {
		<-r.release
	}
	return r.RecordReader.Next()
}

// TestFailedWriteSparesVersionTakenOver (red team F02): a write whose
// version directory was removed under it (a sweep with a tiny age on
// another machine) and reserved again by another write, which committed,
// fails — and its cleanup removes only what it wrote itself, never the
// other write's committed version.
func TestFailedWriteSparesVersionTakenOver(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"w"}
	put(t, s, ModeWrite, k, ids(0), PutOptions{})
	a := &gateReader{RecordReader: twoBatches(t, 1, 2), release: make(chan struct{})}
	defer a.Release()
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(context.Background(), k, a, PutOptions{Mode: ModeWrite})
		done <- err
	}()
	v1 := filepath.Join(dir, "w", "v1")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(filepath.Join(v1, ".version.json")); err == nil && a.n.Load() >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first write never reserved v1")
		}
	}
	if err := os.RemoveAll(v1); err != nil {
		t.Fatal(err)
	}
	b := put(t, s, ModeWrite, k, ids(42), PutOptions{})
	if b.Version != "v1" {
		t.Fatalf("the second write took %s", b.Version)
	}
	close(a.release)
	if err := <-done; err == nil {
		t.Log("the first write committed after all (into another version)")
	}
	if _, rows := readAll(t, s, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: 1}}); rows != `[{"id":42}]` {
		t.Fatalf("v1 reads %s", rows)
	}
}

// twoBatches is a reader of two one-row batches.
func twoBatches(t *testing.T, x, y int64) array.RecordReader {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	var recs []arrow.RecordBatch
	for _, v := range []int64{x, y} {
		bld := array.NewInt64Builder(memory.DefaultAllocator)
		bld.Append(v)
		col := bld.NewArray()
		recs = append(recs, array.NewRecordBatch(sc, []arrow.Array{col}, 1))
		col.Release()
		bld.Release()
	}
	rdr, err := array.NewRecordReader(sc, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
	return rdr
}

// hidingFS lists directories without one name: a listing that missed a
// segment committed while it read the directory, though it saw a later
// one (readdir and S3 listings are no snapshots; CI met it on ext4).
type hidingFS struct {
	fsys.FS
	hide atomic.Value // string: the base name List leaves out
}

func (h *hidingFS) List(ctx context.Context, dir string) ([]fsys.Entry, error) {
	es, err := h.FS.List(ctx, dir)
	hide, _ := h.hide.Load().(string)
	return slices.DeleteFunc(es, func(e fsys.Entry) bool { return e.Name == hide }), err
}

// TestListingThatMissesASegment: a middle segment missing from a listing
// but present by its name is neither a break for Inspect (verify's
// "records 2 to 2 are missing") nor a hole in a fresh server's view of
// the log (its rows unread for the life of the process); a segment truly
// gone is still both.
func TestListingThatMissesASegment(t *testing.T) {
	dir := t.TempDir()
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := []string{"gap"}
	w, _ := newTestStore(t, WithFS(l))
	for i := range 3 {
		mode := ModeAppend
		if i == 0 {
			mode = ModeWrite
		}
		put(t, w, mode, k, ids(int64(i)), PutOptions{})
	}
	h := &hidingFS{FS: l}
	h.hide.Store(segmentName(2))
	s, _ := newTestStore(t, WithFS(h))
	if got := readIDs(t, s, k, Latest); !slices.Equal(got, []int64{0, 1, 2}) {
		t.Errorf("a fresh store whose listing missed segment 2 reads %v, want [0 1 2]", got)
	}
	in, err := s.Inspect(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.LogProblems) > 0 {
		t.Errorf("a segment the listing missed reads as a break: %v", in.LogProblems)
	}
	// Really gone: reported.
	if err := os.Remove(filepath.Join(dir, "gap", logDir, segmentName(2))); err != nil {
		t.Fatal(err)
	}
	in, err = s.Inspect(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	if want := "records 2 to 2 are missing"; len(in.LogProblems) != 1 || !strings.Contains(in.LogProblems[0], want) {
		t.Errorf("a removed segment: problems %q, want one saying %q", in.LogProblems, want)
	}
}

// TestBrokenLogRefused: a log whose chain is broken is read and committed
// onto by nobody (DataLoss), and verify still says where: a segment gone
// from its middle, read by a fresh store (red team round 27's b01), and the
// last segment gone under a running store that holds it in its view
// (b02: a retry was answered with the removed record, and a new commit
// replaced the HEAD that told of the loss: both refused now).
func TestBrokenLogRefused(t *testing.T) {
	k := []string{"broken"}
	three := func(t *testing.T, s *Store) {
		for i := range 3 {
			mode := ModeAppend
			if i == 0 {
				mode = ModeWrite
			}
			put(t, s, mode, k, ids(int64(i)), PutOptions{RequestID: fmt.Sprint("r", i)})
		}
	}
	refused := func(t *testing.T, s *Store, want string, reads bool) {
		t.Helper()
		if reads {
			_, err := s.Read(t.Context(), k, ReadOptions{})
			if !errors.Is(err, ErrDataLoss) || !strings.Contains(err.Error(), want) {
				t.Errorf("read: %v, want DataLoss saying %q", err, want)
			}
		}
		for _, id := range []string{"r2", "new"} {
			rdr := ids(9)
			_, err := s.Put(t.Context(), k, rdr, PutOptions{RequestID: id})
			rdr.Release()
			if !errors.Is(err, ErrDataLoss) || !strings.Contains(err.Error(), want) {
				t.Errorf("put %s: %v, want DataLoss saying %q", id, err, want)
			}
		}
	}
	t.Run("middle segment gone", func(t *testing.T) {
		w, dir := newTestStore(t)
		three(t, w)
		seg := filepath.Join(dir, "broken", logDir, segmentName(2))
		saved, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(seg); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		refused(t, s, "the commit log is broken (segment "+segmentName(3)+" follows record 1)", true)
		in, err := s.Inspect(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		if want := "records 2 to 2 are missing"; len(in.LogProblems) != 1 || !strings.Contains(in.LogProblems[0], want) {
			t.Errorf("verify's problems %q, want one saying %q", in.LogProblems, want)
		}
		// Restored (operations.md): served again, without a restart.
		if err := os.WriteFile(seg, saved, 0o444); err != nil {
			t.Fatal(err)
		}
		if got := readIDs(t, s, k, Latest); !slices.Equal(got, []int64{0, 1, 2}) {
			t.Errorf("after the segment's restoration: %v, want [0 1 2]", got)
		}
		c := put(t, s, ModeAppend, k, ids(3), PutOptions{RequestID: "r3"})
		if c.Seq != 4 {
			t.Errorf("the commit after the restoration is record %d, want 4", c.Seq)
		}
	})
	t.Run("last segment gone under a running store", func(t *testing.T) {
		s, dir := newTestStore(t)
		three(t, s)
		if err := os.Remove(filepath.Join(dir, "broken", logDir, segmentName(3))); err != nil {
			t.Fatal(err)
		}
		// (Its reads are answered from the view it holds, as documented.)
		refused(t, s, "the commit log's last segment ("+segmentName(3)+") is gone", false)
		// Nor retired, nor its policy changed (red team round 28's l01).
		if _, err := s.RetireVersions(t.Context(), k, "", func(_ int, c []RetireCandidate) []int { return []int{0} }); !errors.Is(err, ErrDataLoss) {
			t.Errorf("retire: %v, want DataLoss", err)
		}
		if _, err := s.SetPolicy(t.Context(), k, PolicyAdditive, ""); !errors.Is(err, ErrDataLoss) {
			t.Errorf("set policy: %v, want DataLoss", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "broken", "v0")); err != nil {
			t.Errorf("v0 after a refused retire: %v", err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "broken", logDir, headName))
		if err != nil || !strings.Contains(string(b), `"seq":3`) {
			t.Errorf("HEAD %s (%v), want it still naming record 3", b, err)
		}
	})
	// The last segment left in place, its content altered under a
	// running store (red team round 28's l02).
	for name, alter := range map[string]func([]byte) []byte{
		"last segment emptied":     func([]byte) []byte { return nil },
		"last segment cut":         func(b []byte) []byte { return b[:len(b)/2] },
		"last record rewritten":    func(b []byte) []byte { return bytes.Replace(b, []byte(`"rows":1`), []byte(`"rows":7`), 1) },
		"a record added to it":     func(b []byte) []byte { return append(append([]byte(nil), b...), b...) },
		"last segment same length": func(b []byte) []byte { c := append([]byte(nil), b...); c[len(c)-3] ^= 1; return c },
	} {
		t.Run(name, func(t *testing.T) {
			s, dir := newTestStore(t)
			three(t, s)
			seg := filepath.Join(dir, "broken", logDir, segmentName(3))
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(seg, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(seg, alter(b), 0o644); err != nil {
				t.Fatal(err)
			}
			refused(t, s, "the commit log's last segment ("+segmentName(3)+") no longer holds the records it held", false)
		})
	}
}

// TestSyncLogSharesRefreshes: callers that queue while the log is being
// read share the next read, but never one that began before they
// arrived: a commit made before a caller's syncLog is in its view.
func TestSyncLogSharesRefreshes(t *testing.T) {
	hook, s, other := hookedPair(t, headName)
	k := []string{"shared"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	ps := s.state(profile{keys: k, dir: "shared"})
	ctx := t.Context()

	// 1. A refresh that began before a commit does not serve a caller
	// that arrived after it.
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook.mu.Lock()
	hook.onRead = func(string) {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	hook.mu.Unlock()
	first := make(chan error, 1)
	go func() { first <- s.syncLog(ctx, ps) }()
	<-entered // the first refresh has begun (it read nothing yet)
	rec := put(t, other, ModeAppend, k, ids(2), PutOptions{})
	late := make(chan error, 1)
	go func() { late <- s.syncLog(ctx, ps) }()
	for ps.syncTicket.Load() < 2 {
		runtime.Gosched()
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-late; err != nil {
		t.Fatal(err)
	}
	ps.mu.Lock()
	head := ps.log.head
	ps.mu.Unlock()
	if head < rec.Seq {
		t.Fatalf("a syncLog that began after record %d was committed sees the log up to %d", rec.Seq, head)
	}

	// 2. Callers that queue behind a slow refresh share one.
	var reads atomic.Int32
	hook.mu.Lock()
	hook.onRead = func(string) {
		reads.Add(1)
		time.Sleep(20 * time.Millisecond)
	}
	hook.mu.Unlock()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if err := s.syncLog(ctx, ps); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n > 8 {
		t.Errorf("16 concurrent syncLogs read the log head %d times, want them to share", n)
	}
}

// TestNarrowDictionaryAppends: appends of a dictionary<uint8, string>
// column, each of 200 values of its own, read back together (with batches
// joined) and after a compaction. Before the fix the joined read failed
// ("cannot combine dictionaries") and compaction committed wrong values
// (red team round 9's r03).
func TestNarrowDictionaryAppends(t *testing.T) {
	for _, vt := range []arrow.DataType{arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64} {
		t.Run(vt.String(), func(t *testing.T) { narrowDictionaryAppends(t, vt) })
	}
}

func narrowDictionaryAppends(t *testing.T, vt arrow.DataType) {
	s, _ := newTestStore(t)
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint8, ValueType: vt}
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "d", Type: dt, Nullable: true}}, nil)
	keys := []string{"dict", "narrow"}
	var want []string
	// One put of two batches (one file), then appends.
	var first []arrow.RecordBatch
	for b := range 5 {
		var rows []string
		for i := range 300 {
			v := fmt.Sprintf(`"b%d_%d"`, b, i%200)
			if vt.ID() == arrow.INT64 {
				v = fmt.Sprint(b*1000 + i%200)
			}
			rows = append(rows, fmt.Sprintf(`{"id": %d, "d": %s}`, b*300+i, v))
		}
		want = append(want, rows...)
		if b < 2 {
			rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader("["+strings.Join(rows, ",")+"]"))
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Release()
			if first = append(first, rec); b == 1 {
				rdr, err := array.NewRecordReader(sc, first)
				if err != nil {
					t.Fatal(err)
				}
				put(t, s, ModeWrite, keys, rdr, PutOptions{})
			}
			continue
		}
		put(t, s, ModeAppend, keys, fromJSON(t, sc, "["+strings.Join(rows, ",")+"]"), PutOptions{})
	}
	wantJSON := func() string {
		var v []any
		if err := json.Unmarshal([]byte("["+strings.Join(want, ",")+"]"), &v); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		return string(b)
	}()
	check := func(when string) {
		t.Helper()
		for _, join := range []bool{false, true} {
			got, rows := readAll(t, s, keys, ReadOptions{Join: join})
			if !got.Equal(sc) {
				t.Errorf("%s: schema %s, want %s", when, got, sc)
			}
			var v []any
			if err := json.Unmarshal([]byte(rows), &v); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(v)
			if string(b) != wantJSON {
				t.Errorf("%s (join %v): the rows read differ from those put", when, join)
			}
		}
	}
	check("appended")
	if _, err := s.Compact(context.Background(), keys, CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	check("compacted")
}

// A fixed_size_list of size 0 is refused, and the refused write leaves
// nothing behind (red team round 18's s06).
func TestFixedSizeListSizeZeroRefused(t *testing.T) {
	s, dir := newTestStore(t)
	sc := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.FixedSizeListOf(0, arrow.PrimitiveTypes.Int64), Nullable: true}}, nil)
	before := hashTree(t, dir)
	rdr := fromJSON(t, sc, `[{"l":[]},{"l":null}]`)
	defer rdr.Release()
	if _, err := s.Write(context.Background(), []string{"new", "profile"}, rdr, PutOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v", err)
	}
	assertUnchanged(t, before, hashTree(t, dir))
}

// TestLinkInLogIsDataLoss: a segment, the HEAD, the .log directory, a
// version directory, its .version.json or the manifest replaced by a
// symbolic link (to an identical copy) is storage altered, refused
// DataLoss by a fresh store (red team rounds 28's l03, 29's m03), while a
// profile whose own directory is a link is the request's path (not
// followed, and not called lost).
func TestLinkInLogIsDataLoss(t *testing.T) {
	k := []string{"linked"}
	for _, name := range []string{filepath.Join(logDir, segmentName(2)), filepath.Join(logDir, headName), logDir,
		"v0", filepath.Join("v0", versionInfoName), manifestName} { // (and red team round 29's m03)
		t.Run(name, func(t *testing.T) {
			w, dir := newTestStore(t)
			put(t, w, ModeWrite, k, ids(1), PutOptions{})
			put(t, w, ModeAppend, k, ids(2), PutOptions{})
			p := filepath.Join(dir, "linked", name)
			if err := os.Rename(p, p+".copy"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Base(p)+".copy", p); err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			_, err = s.Read(t.Context(), k, ReadOptions{})
			if !errors.Is(err, ErrDataLoss) || errors.Is(err, fsys.ErrUnsafePath) || !strings.Contains(err.Error(), "link") {
				t.Errorf("read: %v, want DataLoss naming the link", err)
			}
			rdr := ids(3)
			defer rdr.Release()
			if _, err := s.Put(t.Context(), k, rdr, PutOptions{}); !errors.Is(err, ErrDataLoss) || errors.Is(err, fsys.ErrUnsafePath) {
				t.Errorf("put: %v, want DataLoss", err)
			}
		})
	}
	t.Run("profile directory", func(t *testing.T) {
		w, dir := newTestStore(t)
		put(t, w, ModeWrite, k, ids(1), PutOptions{})
		if err := os.Symlink("linked", filepath.Join(dir, "alias")); err != nil {
			t.Fatal(err)
		}
		_, err := w.Read(t.Context(), []string{"alias"}, ReadOptions{})
		if !errors.Is(err, fsys.ErrUnsafePath) || errors.Is(err, ErrDataLoss) {
			t.Errorf("read through a linked profile directory: %v, want ErrUnsafePath, not DataLoss", err)
		}
	})
}
