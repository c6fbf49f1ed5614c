package store

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

func evoSchema(fields ...arrow.Field) *arrow.Schema { return arrow.NewSchema(fields, nil) }

var (
	fID   = arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	fName = arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}
	fX    = arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true}
	fY    = arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true}
)

func TestSemVerOrder(t *testing.T) {
	ordered := []string{"0.9.9", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "1.10.0", "2.0.0"}
	for i := range ordered {
		for j := range ordered {
			a, oka := parseSemVer(ordered[i])
			b, okb := parseSemVer(ordered[j])
			if !oka || !okb {
				t.Fatalf("%q or %q does not parse", ordered[i], ordered[j])
			}
			if got, want := compareSemVer(a, b), cmpInt(i, j); got != want {
				t.Errorf("compare(%s, %s) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	for _, bad := range []string{"", "1", "1.0", "01.0.0", "1.0.0-", "1.0.0-01", "v1.0.0", "1.0.0.0", "1.a.0", "1.0.0+", "-1.0.0", "1.0.0-a..b", "+1.0.0"} {
		if _, ok := parseSemVer(bad); ok {
			t.Errorf("%q parsed as a semantic version", bad)
		}
	}
	if a, _ := parseSemVer("1.0.0+build.5"); compareSemVer(a, must(parseSemVer("1.0.0"))) != 0 {
		t.Error("build metadata must not order")
	}
}

func must(v semVer, ok bool) semVer {
	if !ok {
		panic("bad semver")
	}
	return v
}

// TestAdditiveAppend: an append that adds a nullable column under a higher
// schema version lands next to the older files, which are untouched; the
// version reads as the union, older rows null in the new column.
func TestAdditiveAppend(t *testing.T) {
	s, dir := newTestStore(t)
	ctx := context.Background()
	keys := []string{"evo", "p"}
	put(t, s, ModeWrite, keys, fromJSON(t, evoSchema(fID, fName), `[{"id":1,"name":"a"},{"id":2,"name":"b"}]`), PutOptions{SchemaVersion: "1.0.0"})
	before := hashTree(t, dir)
	// The new column in the middle of the client's order.
	c := put(t, s, ModeAppend, keys, fromJSON(t, evoSchema(fID, fX, fName), `[{"id":3,"x":1.5,"name":"c"}]`), PutOptions{SchemaVersion: "1.1.0"})
	if c.Schema == "" || c.SchemaVersion != "1.1.0" {
		t.Fatalf("record: schema %q, schema version %q", c.Schema, c.SchemaVersion)
	}
	after := hashTree(t, dir)
	for name, sum := range before {
		if strings.HasSuffix(name, ".parquet") && after[name] != sum {
			t.Errorf("%s changed", name)
		}
	}
	sc, rows := readAll(t, s, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
	if got := strings.Join(fieldNames(sc), ","); got != "id,name,x" {
		t.Errorf("schema %s, want id,name,x (first-seen order)", got)
	}
	want := `[{"id":1,"name":"a","x":null},{"id":2,"name":"b","x":null},{"id":3,"name":"c","x":1.5}]`
	if rows != want {
		t.Errorf("rows\n%s\nwant\n%s", rows, want)
	}
	// Plain appends then inherit 1.1.0 and the new schema.
	c2 := put(t, s, ModeAppend, keys, fromJSON(t, evoSchema(fX, fID, fName), `[{"id":4,"x":2,"name":"d"}]`), PutOptions{})
	if c2.Schema != "" || c2.SchemaVersion != "1.1.0" {
		t.Errorf("plain append after evolution: schema %q, schema version %q", c2.Schema, c2.SchemaVersion)
	}
	// A second evolution.
	put(t, s, ModeAppend, keys, fromJSON(t, evoSchema(fID, fName, fX, fY), `[{"id":5,"x":3,"name":"e","y":"why"}]`), PutOptions{SchemaVersion: "1.2.0"})
	_, rows = readAll(t, s, keys, ReadOptions{Columns: []string{"y", "id"}})
	want = `[{"id":1,"y":null},{"id":2,"y":null},{"id":3,"y":null},{"id":4,"y":null},{"id":5,"y":"why"}]`
	if rows != want {
		t.Errorf("projection y,id\n%s\nwant\n%s", rows, want)
	}
	sn, err := s.Snapshot(ctx, keys, SnapshotOptions{Version: Latest})
	if err != nil {
		t.Fatal(err)
	}
	if sn.SchemaVersion != "1.2.0" {
		t.Errorf("snapshot schema version %q", sn.SchemaVersion)
	}
	_, vers, err := s.Versions(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	wantCounts := []SchemaVersionCount{{"1.0.0", 1, 2}, {"1.1.0", 2, 2}, {"1.2.0", 1, 1}}
	if got := vers[0].SchemaVersions; !reflect.DeepEqual(got, wantCounts) {
		t.Errorf("schema versions %+v, want %+v", got, wantCounts)
	}
	if vers[0].SchemaVersion != "1.2.0" {
		t.Errorf("version summary schema version %q", vers[0].SchemaVersion)
	}
}

func fieldNames(sc *arrow.Schema) []string {
	out := make([]string, sc.NumFields())
	for i, f := range sc.Fields() {
		out[i] = f.Name
	}
	return out
}

// TestAdditiveAppendRefused: every way an append can change the schema
// other than adding nullable columns under a higher schema version is
// InvalidArgument, says what the rule is, and leaves the data directory as
// it was.
func TestAdditiveAppendRefused(t *testing.T) {
	notNullX := arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64}
	idStr := arrow.Field{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true}
	cases := []struct {
		name   string
		sc     *arrow.Schema
		rows   string
		sv     string
		format string
		want   []string
	}{
		{"new column without a version", evoSchema(fID, fName, fX), `[{"id":3,"name":"c","x":1}]`, "", "", []string{`adds columns ["x"]`, `schema_version above`, `"1.1.0"`}},
		{"new column, same version", evoSchema(fID, fName, fX), `[{"id":3,"name":"c","x":1}]`, "1.0.0", "", []string{`not above`, `"1.0.0"`}},
		{"new column, lower version", evoSchema(fID, fName, fX), `[{"id":3,"name":"c","x":1}]`, "0.9.0", "", []string{`not above`}},
		{"new column, not semver", evoSchema(fID, fName, fX), `[{"id":3,"name":"c","x":1}]`, "2", "", []string{`not a semantic version`}},
		{"new non-nullable column", evoSchema(fID, fName, notNullX), `[{"id":3,"name":"c","x":1}]`, "1.1.0", "", []string{`non-nullable`, `declare it nullable`}},
		{"dropped column", evoSchema(fID), `[{"id":3}]`, "1.1.0", "", []string{`missing`, `never dropped`}},
		{"renamed column", evoSchema(fID, fY), `[{"id":3,"y":"c"}]`, "1.1.0", "", []string{`never dropped or renamed`}},
		{"retyped column", evoSchema(idStr, fName, fX), `[{"id":"3","name":"c","x":1}]`, "1.1.0", "", []string{`"id" is utf8, not int64`, `existing columns keep their types`}},
		{"version bump without columns", evoSchema(fID, fName), `[{"id":3,"name":"c"}]`, "1.1.0", "", []string{`adds no column`}},
		{"lower version without columns", evoSchema(fID, fName), `[{"id":3,"name":"c"}]`, "0.1.0", "", []string{`has schema version "1.0.0", not "0.1.0"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newTestStore(t)
			keys := []string{"p"}
			put(t, s, ModeWrite, keys, fromJSON(t, evoSchema(fID, fName), `[{"id":1,"name":"a"}]`), PutOptions{SchemaVersion: "1.0.0", Format: tc.format})
			before := hashTree(t, dir)
			rdr := fromJSON(t, tc.sc, tc.rows)
			defer rdr.Release()
			_, err := s.Put(context.Background(), keys, rdr, PutOptions{SchemaVersion: tc.sv})
			if !errors.Is(err, ErrSchemaMismatch) && !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err %v, want a schema mismatch", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if after := hashTree(t, dir); !reflect.DeepEqual(before, after) {
				t.Errorf("the data directory changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// TestAdditiveAppendCSVRefused: CSV files carry no schema: CSV profiles
// do not evolve.
func TestAdditiveAppendCSVRefused(t *testing.T) {
	s, _ := newTestStore(t)
	keys := []string{"c"}
	put(t, s, ModeWrite, keys, fromJSON(t, evoSchema(fID, fName), `[{"id":1,"name":"a"}]`), PutOptions{SchemaVersion: "1.0.0", Format: "csv"})
	rdr := fromJSON(t, evoSchema(fID, fName, fX), `[{"id":1,"name":"a","x":1}]`)
	defer rdr.Release()
	_, err := s.Put(context.Background(), keys, rdr, PutOptions{SchemaVersion: "1.1.0"})
	if !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), "CSV") {
		t.Fatalf("err %v", err)
	}
}

var _ = array.NewRecordReader
