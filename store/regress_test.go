package store

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
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
	if c.Rows != 3 || n != 3 {
		t.Fatalf("committed %d rows, read %d", c.Rows, n)
	}
}

func TestCSVWholeFloatsStayFloats(t *testing.T) {
	s, dir := newTestStore(t)
	sc := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	put(t, s, ModeWrite, []string{"f"}, fromJSON(t, sc, `[{"x":1},{"x":null},{"x":2.5},{"x":1e300}]`), PutOptions{Format: "csv"})
	b, _ := os.ReadFile(filepath.Join(dir, "f", "v0", "0.csv"))
	if string(b) != "x\n1.0\n\n2.5\n1e+300\n" {
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
		assertUnchanged(t, before, hashTree(t, dir))
	}
}

func TestUnstorableDataIsInvalidArgument(t *testing.T) {
	s, dir := newTestStore(t)
	// arrow-go cannot write a fixed_size_list with a null slot between
	// valid ones ("non-zero length null components").
	sc := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int64), Nullable: true}}, nil)
	before := hashTree(t, dir)
	rdr := fromJSON(t, sc, `[{"l":[1,2]},{"l":null},{"l":[3,4]}]`)
	defer rdr.Release()
	_, err := s.Write(context.Background(), []string{"new", "profile"}, rdr, PutOptions{})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v", err)
	}
	// A refused first write leaves no empty profile directory behind.
	assertUnchanged(t, before, hashTree(t, dir))
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

// A writer killed after publishing its root file but before its commit
// record (and request record) leaves rows readers see; the client's retry
// with the same request id must roll that put forward, not write the rows
// again (the reliability kill test found duplicates).
func TestRetryRollsForwardAPublishedPut(t *testing.T) {
	s, dir := newTestStore(t, WithHost("h1"))
	ctx := context.Background()
	k := []string{"r"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	c := put(t, s, ModeAppend, k, ids(2, 3), PutOptions{RequestID: "job-9", Metadata: []byte(`{"run":1}`)})
	// Make it look like the writer died right after publishing 1.parquet.
	pdir := filepath.Join(dir, "r")
	done, pending := requestNames(profile{keys: k, dir: "r"}, "job-9")
	for _, f := range []string{filepath.Join(pdir, "v0", ".1.commit.json"), filepath.Join(dir, done)} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	dead, _ := json.Marshal(LockInfo{Host: "h1", PID: 1 << 30, Time: time.Now()})
	if err := os.WriteFile(filepath.Join(dir, pending), dead, 0o644); err != nil {
		t.Fatal(err)
	}
	rdr := ids(2, 3)
	defer rdr.Release()
	c2, err := s.Append(ctx, k, rdr, PutOptions{RequestID: "job-9"})
	if err != nil || !c2.Replayed || c2.Version != "v0" || c2.Index != 1 || c2.Rows != 2 ||
		c2.Files[0].SHA256 != c.Files[0].SHA256 || strings.Join(strings.Fields(string(c2.Metadata)), "") != `{"run":1}` {
		t.Fatalf("retry: %+v %v", c2, err)
	}
	if _, rows := readAll(t, s, k, latest); rows != `[{"id":1},{"id":2},{"id":3}]` {
		t.Fatalf("rows %s", rows)
	}
	if vr, err := s.Verify(ctx, VerifyOptions{}); err != nil || !vr.OK {
		t.Fatalf("verify: %+v %v", vr, err)
	}
}

// A put whose commit record cannot be written (disk full) removes the file
// it published: nothing is visible, and the retry writes it once.
func TestFailedCommitRecordUnpublishes(t *testing.T) {
	var failRecord bool
	s, dir := newTestStore(t, WithFS(func(root string) FS {
		return &failingFS{FS: NewLocalFS(root), fail: func(name string) bool {
			return failRecord && strings.HasSuffix(name, commitSuffix)
		}}
	}))
	k := []string{"f"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	failRecord = true
	before := hashTree(t, dir)
	rdr := ids(2)
	_, err := s.Append(context.Background(), k, rdr, PutOptions{RequestID: "x"})
	rdr.Release()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("got %v", err)
	}
	after := hashTree(t, dir)
	delete(after, "f/v0/.1.parquet.claim") // the claimed index stays a gap
	for name := range after {
		if _, ok := before[name]; !ok && !strings.HasPrefix(name, "f/.requests") {
			t.Errorf("left behind: %s", name)
		}
	}
	failRecord = false
	put(t, s, ModeAppend, k, ids(2), PutOptions{RequestID: "x"})
	if _, rows := readAll(t, s, k, latest); rows != `[{"id":1},{"id":2}]` {
		t.Fatalf("rows %s", rows)
	}
}

// failingFS fails CreateExclusive of chosen names with ENOSPC.
type failingFS struct {
	FS
	fail func(name string) bool
}

func (f *failingFS) CreateExclusive(name string, data []byte) error {
	if f.fail(name) {
		return &os.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
	}
	return f.FS.CreateExclusive(name, data)
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

// A write killed after publishing its files but before its commit record,
// later overtaken by another write, is still not a version: its rows are
// nobody's (the client's retry wrote them elsewhere). The kill test found
// them read twice.
func TestUncommittedWriteBelowLatestIsNotAVersion(t *testing.T) {
	s, dir := newTestStore(t)
	ctx := context.Background()
	k := []string{"w"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	put(t, s, ModeWrite, k, ids(2), PutOptions{})
	put(t, s, ModeWrite, k, ids(3), PutOptions{})
	if err := os.Remove(filepath.Join(dir, "w", "v1", ".0.commit.json")); err != nil {
		t.Fatal(err)
	}
	latestV, vs, err := s.Versions(ctx, k)
	if err != nil || latestV != 2 || len(vs) != 2 || vs[0].Version != "v0" || vs[1].Version != "v2" {
		t.Fatalf("versions %d %+v %v", latestV, vs, err)
	}
	if _, err := s.Read(ctx, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: 1}}); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("read v1: %v", err)
	}
	vr, err := s.Verify(ctx, VerifyOptions{StaleAfter: time.Nanosecond})
	if err != nil || len(vr.Problems) != 1 || vr.Problems[0].Kind != ProblemOrphan || vr.Problems[0].Path != "w/v1" {
		t.Fatalf("verify: %+v %v", vr, err)
	}
	rep, err := s.Sweep(ctx, 0)
	if err != nil || len(rep.Removed) != 1 || rep.Removed[0] != "w/v1" {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	if vr, err := s.Verify(ctx, VerifyOptions{}); err != nil || !vr.OK {
		t.Fatalf("verify after sweep: %+v %v", vr, err)
	}
}

// A write killed between its commit record and the manifest move: the retry
// finds the record and moves the manifest.
func TestReplayedWriteMovesTheManifest(t *testing.T) {
	s, dir := newTestStore(t, WithHost("h1"))
	ctx := context.Background()
	k := []string{"m"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	put(t, s, ModeWrite, k, ids(2), PutOptions{RequestID: "w-2"})
	done, pending := requestNames(profile{keys: k, dir: "m"}, "w-2")
	if err := os.Remove(filepath.Join(dir, done)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "m", "manifest.json"), encodeManifest(0), 0o644); err != nil {
		t.Fatal(err)
	}
	dead, _ := json.Marshal(LockInfo{Host: "h1", PID: 1 << 30, Time: time.Now()})
	if err := os.WriteFile(filepath.Join(dir, pending), dead, 0o644); err != nil {
		t.Fatal(err)
	}
	rdr := ids(2)
	defer rdr.Release()
	c, err := s.Write(ctx, k, rdr, PutOptions{RequestID: "w-2"})
	if err != nil || !c.Replayed || c.Version != "v1" {
		t.Fatalf("replay %+v %v", c, err)
	}
	if _, rows := readAll(t, s, k, latest); rows != `[{"id":2}]` {
		t.Fatalf("latest after replay: %s", rows)
	}
}

// A killed process its parent has not reaped yet (a zombie) owns nothing:
// the kill test's clients waited minutes on the pending markers of such
// servers.
func TestZombieOwnerIsDead(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	pid := cmd.Process.Pid
	if !pidAlive(pid) {
		t.Fatal("a running process is not alive")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for pidAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatal("a killed, unreaped process still counts as alive")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Wait()
}
