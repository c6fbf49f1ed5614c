package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiverdb/quiver/store/filter"
	"github.com/quiverdb/quiver/store/ipccache"
)

var ordersSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "total", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

const ordersRows = `[
 {"id": 1, "region": "eu", "total": 50, "note": "a"},
 {"id": 2, "region": "us", "total": 150, "note": null},
 {"id": 3, "region": "eu", "total": 250, "note": "b"},
 {"id": 4, "region": null, "total": 300, "note": "c"},
 {"id": 5, "region": "us", "total": null, "note": "d"},
 {"id": 6, "region": "eu", "total": 101, "note": "e"}
]`

func mustWhere(t *testing.T, s string) *filter.Expr {
	t.Helper()
	e, err := filter.ParseWhere(s)
	if err != nil {
		t.Fatalf("ParseWhere(%q): %v", s, err)
	}
	return e
}

// readIDs reads the "id" column of a filtered read as a comma list.
func filteredIDs(t *testing.T, s *Store, keys []string, o ReadOptions) string {
	t.Helper()
	rdr, err := s.Read(context.Background(), keys, o)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var out []string
	for rdr.Next() {
		rec := rdr.RecordBatch()
		idx := rec.Schema().FieldIndices("id")
		if len(idx) != 1 {
			t.Fatalf("no id column in %s", rec.Schema())
		}
		col := rec.Column(idx[0])
		for i := 0; i < col.Len(); i++ {
			out = append(out, col.ValueStr(i))
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, ",")
}

func TestFilterReads(t *testing.T) {
	s, _ := newTestStore(t)
	flat := []string{"f", "flat"}
	parted := []string{"f", "parted"}
	put(t, s, ModeWrite, flat, fromJSON(t, ordersSchema, ordersRows), PutOptions{})
	put(t, s, ModeWrite, parted, fromJSON(t, ordersSchema, ordersRows), PutOptions{PartitionBy: []string{"region"}})
	cases := []struct {
		where string
		want  string // ids, in the flat profile's order
	}{
		{"region = 'eu' and total > 100", "3,6"},
		{"region = eu", "1,3,6"},
		{"region != 'eu'", "2,5"},
		{"region is null", "4"},
		{"region is not null and note is null", "2"},
		{"not (region = 'eu')", "2,5"},
		{"region in ('us', 'xx') or total >= 300", "2,4,5"},
		{"total < 100 or total is null", "1,5"},
		{"not (total > 100)", "1"},
		{"id not in (1, 2, 3)", "4,5,6"},
		{"id <= 2", "1,2"},
		{"note > 'b'", "4,5,6"},
		{"id > 100", ""},
	}
	for _, c := range cases {
		got := filteredIDs(t, s, flat, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest, Filter: mustWhere(t, c.where)}})
		if got != c.want {
			t.Errorf("flat %q: ids %q, want %q", c.where, got, c.want)
		}
		// The partitioned profile holds the same rows in another order.
		got = filteredIDs(t, s, parted, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest, Filter: mustWhere(t, c.where)}})
		if sortIDs(got) != sortIDs(c.want) {
			t.Errorf("partitioned %q: ids %q, want %q", c.where, got, c.want)
		}
	}
}

func sortIDs(s string) string {
	if s == "" {
		return s
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		for j := i + 1; j < len(parts); j++ {
			if len(parts[j]) < len(parts[i]) || len(parts[j]) == len(parts[i]) && parts[j] < parts[i] {
				parts[i], parts[j] = parts[j], parts[i]
			}
		}
	}
	return strings.Join(parts, ",")
}

// A filter on a column the read does not project still filters, and the
// column is not returned.
func TestFilterOnUnprojectedColumn(t *testing.T) {
	s, _ := newTestStore(t)
	keys := []string{"f", "proj"}
	put(t, s, ModeWrite, keys, fromJSON(t, ordersSchema, ordersRows), PutOptions{PartitionBy: []string{"region"}})
	o := ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest, Filter: mustWhere(t, "total > 100 and region = 'eu'")}, Columns: []string{"note", "id"}}
	sc, rows := readAll(t, s, keys, o)
	if got := sc.String(); strings.Contains(got, "total") || strings.Contains(got, "region") {
		t.Fatalf("schema %s has the filter's columns", got)
	}
	if sc.NumFields() != 2 || sc.Field(0).Name != "note" || sc.Field(1).Name != "id" {
		t.Fatalf("schema %s, want note, id", sc)
	}
	if want := `[{"id":3,"note":"b"},{"id":6,"note":"e"}]`; rows != want {
		t.Fatalf("rows %s, want %s", rows, want)
	}
}

func TestFilterErrors(t *testing.T) {
	s, _ := newTestStore(t)
	keys := []string{"f", "errs"}
	put(t, s, ModeWrite, keys, fromJSON(t, ordersSchema, ordersRows), PutOptions{})
	for _, c := range []struct{ where, want string }{
		{"nope = 1", `"nope": no such column`},
		{"total = 'x'", `"total"`},
		{"id = 1.5", `not an integer`},
		{"region > 5", `"region"`},
		{"id = 99999999999999999999", `out of range`},
	} {
		_, err := s.Snapshot(context.Background(), keys, SnapshotOptions{Version: Latest, Filter: mustWhere(t, c.where)})
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want ErrInvalidArgument naming %s", c.where, err, c.want)
		}
	}
}

// Row groups whose statistics rule the filter out are not decoded, and
// PruneSnapshot drops the files none of whose row groups can match.
func TestFilterSkipsRowGroups(t *testing.T) {
	s, _ := newTestStore(t, WithRowGroupRows(100))
	keys := []string{"f", "sorted"}
	for part := int64(0); part < 3; part++ {
		vals := make([]int64, 1000)
		for i := range vals {
			vals[i] = part*1000 + int64(i)
		}
		put(t, s, ModeAppend, keys, ids(vals...), PutOptions{})
	}
	e := mustWhere(t, "id >= 1250 and id < 1350")
	rdr, err := s.Read(context.Background(), keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest, Filter: e}})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	read, skipped := rdr.RowGroups()
	rdr.Release()
	if n != 100 {
		t.Fatalf("%d rows, want 100", n)
	}
	// Files 0 and 2 are wholly out of range: all 20 of their row groups
	// are skipped, and 8 of file 1's.
	if read != 2 || skipped != 28 {
		t.Fatalf("row groups read %d, skipped %d; want 2 and 28", read, skipped)
	}

	sn, err := s.Snapshot(context.Background(), keys, SnapshotOptions{Version: Latest, Filter: e})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.PruneSnapshot(context.Background(), sn)
	if err != nil {
		t.Fatal(err)
	}
	if len(sn.Files) != 1 || rows != -1 {
		t.Fatalf("pruned to %d files, %d rows; want 1 file, rows unknown", len(sn.Files), rows)
	}
	// A filter the statistics decide whole is counted exactly.
	sn, err = s.Snapshot(context.Background(), keys, SnapshotOptions{Version: Latest, Filter: mustWhere(t, "id >= 1000")})
	if err != nil {
		t.Fatal(err)
	}
	if rows, err = s.PruneSnapshot(context.Background(), sn); err != nil || rows != 2000 || len(sn.Files) != 2 {
		t.Fatalf("id >= 1000: %d files, %d rows, %v; want 2 files, 2000 rows", len(sn.Files), rows, err)
	}
}

func TestReadLimit(t *testing.T) {
	s, _ := newTestStore(t)
	keys := []string{"f", "limit"}
	for i := int64(0); i < 4; i++ {
		put(t, s, ModeAppend, keys, ids(3*i, 3*i+1, 3*i+2), PutOptions{})
	}
	for _, c := range []struct {
		limit int64
		where string
		want  string
	}{
		{1, "", "0"},
		{4, "", "0,1,2,3"},
		{100, "", "0,1,2,3,4,5,6,7,8,9,10,11"},
		{2, "id > 4", "5,6"},
		{3, "id in (1, 11)", "1,11"},
	} {
		o := ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}, Limit: c.limit}
		if c.where != "" {
			o.Filter = mustWhere(t, c.where)
		}
		if got := filteredIDs(t, s, keys, o); got != c.want {
			t.Errorf("limit %d %q: %q, want %q", c.limit, c.where, got, c.want)
		}
	}
}

func TestFilterCSV(t *testing.T) {
	s, _ := newTestStore(t)
	keys := []string{"f", "csv"}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	put(t, s, ModeWrite, keys, fromJSON(t, sc, `[{"id": 1, "region": "eu"}, {"id": 2, "region": "us"}, {"id": 3, "region": "eu"}]`), PutOptions{Format: "csv"})
	got := filteredIDs(t, s, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest, Filter: mustWhere(t, "region = 'eu'")}, Limit: 5})
	if got != "1,3" {
		t.Fatalf("csv filtered ids %q, want 1,3", got)
	}
}

// A profile the IPC cache holds is still filtered exactly, and limited.
func TestFilterWithCache(t *testing.T) {
	c, err := ipccache.Open(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newTestStore(t, WithCache(c))
	keys := []string{"f", "cached"}
	put(t, s, ModeWrite, keys, fromJSON(t, ordersSchema, ordersRows), PutOptions{})
	all := ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}, Cached: true}
	for i := 0; i < 2; i++ { // fill, then hit
		if got := filteredIDs(t, s, keys, all); got != "1,2,3,4,5,6" {
			t.Fatalf("cached read %q", got)
		}
	}
	o := all
	o.Filter = mustWhere(t, "region = 'eu'")
	if got := filteredIDs(t, s, keys, o); got != "1,3,6" {
		t.Fatalf("cached filtered read %q, want 1,3,6", got)
	}
	o = all
	o.Limit = 2
	if got := filteredIDs(t, s, keys, o); got != "1,2" {
		t.Fatalf("cached limited read %q, want 1,2", got)
	}
}

// A pinned version is filtered against its own schema and files.
func TestFilterPinnedVersion(t *testing.T) {
	s, _ := newTestStore(t)
	keys := []string{"f", "pinned"}
	put(t, s, ModeWrite, keys, ids(1, 2, 3), PutOptions{})
	put(t, s, ModeWrite, keys, fromJSON(t, ordersSchema, ordersRows), PutOptions{})
	got := filteredIDs(t, s, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: 0, Filter: mustWhere(t, "id >= 2")}})
	if got != "2,3" {
		t.Fatalf("v0 filtered: %q", got)
	}
	_, err := s.Snapshot(context.Background(), keys, SnapshotOptions{Version: 0, Filter: mustWhere(t, "region = 'eu'")})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("v0 has no region: %v", err)
	}
}

// TestFilterLongStringStatistics: writers keep no maximum for a column
// chunk whose longest string is over 4 KiB (arrow-go's and pyarrow's
// statistics limit); arrow-go then reports the missing maximum as the
// empty string, and pruning by it dropped matching rows (red team r01).
func TestFilterLongStringStatistics(t *testing.T) {
	s, _ := newTestStore(t)
	keys := []string{"f", "longstr"}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	put(t, s, ModeWrite, keys, fromJSON(t, sc,
		`[{"id": 1, "s": "a"}, {"id": 2, "s": "`+strings.Repeat("z", 5000)+`"}, {"id": 3, "s": null}, {"id": 4, "s": "m"}]`), PutOptions{})
	for where, want := range map[string]string{"s > 'x'": "2", "s = 'a'": "1", "s >= 'm'": "2,4", "s < 'b'": "1"} {
		got := sortIDs(filteredIDs(t, s, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest, Filter: mustWhere(t, where)}}))
		if got != want {
			t.Errorf("%s: ids %q, want %q", where, got, want)
		}
		sn, err := s.Snapshot(context.Background(), keys, SnapshotOptions{Version: Latest, Filter: mustWhere(t, where)})
		if err != nil {
			t.Fatal(err)
		}
		if rows, err := s.PruneSnapshot(context.Background(), sn); err != nil || (rows >= 0 && rows != int64(len(strings.Split(want, ",")))) {
			t.Errorf("%s: planned %d rows, %v", where, rows, err)
		}
	}
}
