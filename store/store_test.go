package store

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/internal/poison"
)

// newTestStore opens a store on a temp dir with a checked allocator that
// must be empty when the test ends, and that poisons what is freed (so
// memory used after Arrow freed it reads as garbage, as it may once the
// read pool hands it out again).
func newTestStore(t *testing.T, opts ...Option) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	mem := memory.NewCheckedAllocator(poison.Allocator{Allocator: memory.NewGoAllocator()})
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	s, err := Open(dir, append([]Option{WithAllocator(mem), WithLockTimeout(2e9)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// ids builds a one-column int64 batch reader.
func ids(vals ...int64) array.RecordReader {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(vals, nil)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, int64(len(vals)))
	defer rec.Release()
	rdr, err := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	if err != nil {
		panic(err)
	}
	return rdr
}

// fromJSON builds a reader of one batch from JSON rows.
func fromJSON(t *testing.T, sc *arrow.Schema, rows string) array.RecordReader {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	rdr, err := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

// readAll reads a profile into JSON rows (one string) and its schema.
func readAll(t *testing.T, s *Store, keys []string, o ReadOptions) (*arrow.Schema, string) {
	t.Helper()
	rdr, err := s.Read(context.Background(), keys, o)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var rows []json.RawMessage
	for rdr.Next() {
		b, err := rdr.RecordBatch().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var part []json.RawMessage
		if err := json.Unmarshal(b, &part); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, part...)
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rows)
	return rdr.Schema(), string(b)
}

// readErr reads a profile through and returns the read's error (of the
// plan or of any batch), for tests of reads that must fail.
func readErr(s *Store, keys []string, o ReadOptions) error {
	rdr, err := s.Read(context.Background(), keys, o)
	if err != nil {
		return err
	}
	defer rdr.Release()
	for rdr.Next() {
	}
	return rdr.Err()
}

func put(t *testing.T, s *Store, mode Mode, keys []string, rdr array.RecordReader, o PutOptions) *CommitRecord {
	t.Helper()
	defer rdr.Release()
	o.Mode = mode
	c, err := s.Put(context.Background(), keys, rdr, o)
	if err != nil {
		t.Fatalf("%s %v: %v", mode, keys, err)
	}
	return c
}

// tree lists every file and dir under dir, relative, sorted.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestWriteAppendWriteLayout(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"sales", "orders"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	put(t, s, ModeAppend, k, ids(2), PutOptions{})
	put(t, s, ModeWrite, k, ids(3), PutOptions{})
	got := strings.Join(tree(t, filepath.Join(dir, "sales", "orders")), " ")
	want := ".log .log/00000000000000000001.ndjson .log/00000000000000000002.ndjson .log/00000000000000000003.ndjson .log/HEAD .quiver.kind manifest.json v0 v0/.1.parquet.claim v0/.version.json v0/0.parquet v0/1.parquet v1 v1/.version.json v1/0.parquet"
	if got != want {
		t.Fatalf("layout\n got %s\nwant %s", got, want)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "sales", "orders", "manifest.json"))
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil || len(m) != 1 || m["latest_data_dir"] != "v1" {
		t.Fatalf("manifest %s", b)
	}
	if err := os.WriteFile(filepath.Join(dir, "sales", "orders", "v1", ".half-written.parquet.tmp"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, rows := readAll(t, s, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: -1}}); rows != `[{"id":3}]` {
		t.Fatalf("latest: %s", rows)
	}
	if _, rows := readAll(t, s, []string{"sales/orders"}, ReadOptions{SnapshotOptions: SnapshotOptions{Version: 0}}); rows != `[{"id":1},{"id":2}]` {
		t.Fatalf("v0: %s", rows)
	}
}

func TestKeys(t *testing.T) {
	s, _ := newTestStore(t)
	put(t, s, ModeWrite, []string{"sales", "orders"}, ids(1), PutOptions{})
	cases := []struct {
		keys []string
		err  error
		msg  string
	}{
		{nil, ErrInvalidKey, "at least one key"},
		{[]string{".."}, ErrInvalidKey, "outside"},
		{[]string{"sales", ".."}, ErrInvalidKey, "outside"},
		{[]string{"sales"}, ErrNotFound, "not a profile"},
		{[]string{".hidden"}, ErrInvalidKey, "starts with '.'"},
		{[]string{"a\\b"}, ErrInvalidKey, "separator"},
		{[]string{"a=b"}, ErrInvalidKey, "'='"},
		{[]string{"a\x00b"}, ErrInvalidKey, "NUL"},
		{[]string{""}, ErrInvalidKey, "empty"},
		{[]string{"sales", "orders "}, ErrInvalidKey, "white space"},
		{[]string{" sales", "orders"}, ErrInvalidKey, "white space"},
		{[]string{"sales", "orders\u00a0"}, ErrInvalidKey, "white space"},
		{[]string{"a\u0085b"}, ErrInvalidKey, "control character"},
		{[]string{"a\x7fb"}, ErrInvalidKey, "control character"},
		{[]string{"safe\u202eexe.txt"}, ErrInvalidKey, "bidirectional"},
		{[]string{"a\u2067b"}, ErrInvalidKey, "bidirectional"},
		{[]string{"nope"}, ErrNotFound, "nope"},
		{[]string{"two words"}, ErrNotFound, "two words"},
		{[]string{"caf\u00e9", "\U0001F469\u200D\U0001F4BB"}, ErrNotFound, "caf"},
	}
	for _, c := range cases {
		_, err := s.Read(context.Background(), c.keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: -1}})
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: got %v, want %v containing %q", c.keys, err, c.err, c.msg)
		}
		if err != nil && strings.Contains(err.Error(), s.Root()) {
			t.Errorf("%q: error shows the server path: %v", c.keys, err)
		}
	}
}
