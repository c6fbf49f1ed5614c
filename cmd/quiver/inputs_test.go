package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/quiverdb/quiver/store/codec"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// readAll opens path as format with a checked allocator and returns its
// schema and per-column values as strings.
func readAll(t *testing.T, path, format string) (*arrow.Schema, [][]string) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in, err := openInput(t.Context(), path, format, mem, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	sc := in.rdr.Schema()
	cols := make([][]string, sc.NumFields())
	for in.rdr.Next() {
		rec := in.rdr.RecordBatch()
		for c := range cols {
			for i := 0; i < int(rec.NumRows()); i++ {
				cols[c] = append(cols[c], cellString(rec.Column(c), i))
			}
		}
	}
	if err := in.rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return sc, cols
}

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCSVInfersFromManyRows(t *testing.T) {
	// The first row alone would make val an int and flag a bool-looking int.
	p := write(t, "a.csv", "id,val,flag,name,empty\n1,2,true,a,\n2,2.5,FALSE,\"b, c\",\n3,,True,,\n")
	sc, cols := readAll(t, p, fmtCSV)
	want := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Boolean,
		arrow.BinaryTypes.String, arrow.BinaryTypes.String}
	for i, w := range want {
		if !arrow.TypeEqual(sc.Field(i).Type, w) {
			t.Fatalf("column %s: %s, want %s", sc.Field(i).Name, sc.Field(i).Type, w)
		}
	}
	if got := strings.Join(cols[1], "|"); got != "2|2.5|null" {
		t.Fatalf("val: %s", got)
	}
	if got := strings.Join(cols[2], "|"); got != "true|false|true" {
		t.Fatalf("flag: %s", got)
	}
	// An empty field is null in a string column too, as the store reads it.
	if got := strings.Join(cols[3], "|"); got != "a|b, c|null" {
		t.Fatalf("name: %q", got)
	}
}

// quiver put infers CSV types as the store and polars do: only true/false
// (any case) are booleans and only an empty field is null.
func TestCSVInfersAsTheStore(t *testing.T) {
	for _, c := range []struct {
		values string
		want   arrow.DataType
	}{
		{"t\nf", arrow.BinaryTypes.String},
		{"1\n0", arrow.PrimitiveTypes.Int64},
		{"NULL\n1", arrow.BinaryTypes.String},
		{"null\n1.5", arrow.BinaryTypes.String},
		{"TRUE\n\nfalse", arrow.FixedWidthTypes.Boolean},
		{"+5", arrow.BinaryTypes.String},
	} {
		sc, _ := readAll(t, write(t, "a.csv", "c\n"+c.values+"\n"), fmtCSV)
		if !arrow.TypeEqual(sc.Field(0).Type, c.want) {
			t.Errorf("%q: %s, want %s", c.values, sc.Field(0).Type, c.want)
		}
	}
	for name, body := range map[string]string{"empty": "", "duplicate": "a,a\n1,2\n"} {
		if _, err := openInput(t.Context(), write(t, name+".csv", body), fmtCSV, memory.DefaultAllocator, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestNDJSONInfersColumnsInOrder(t *testing.T) {
	p := write(t, "a.ndjson", `{"b": 1, "a": "x"}`+"\n\n"+`{"a": "y", "b": 2.5, "c": true}`+"\n"+`{"a": null}`+"\n")
	sc, cols := readAll(t, p, fmtNDJSON)
	if columnNames(sc) != "b, a, c" {
		t.Fatalf("columns %s", columnNames(sc))
	}
	if !arrow.TypeEqual(sc.Field(0).Type, arrow.PrimitiveTypes.Float64) || !arrow.TypeEqual(sc.Field(2).Type, arrow.FixedWidthTypes.Boolean) {
		t.Fatalf("schema %s", sc)
	}
	if got := strings.Join(cols[1], "|"); got != "x|y|null" {
		t.Fatalf("a: %s", got)
	}
}

func TestNDJSONRefusesWhatItCannotInfer(t *testing.T) {
	for name, body := range map[string]string{
		"nested": `{"a": {"b": 1}}`,
		"mixed":  `{"a": 1}` + "\n" + `{"a": "x"}`,
		"array":  `[1, 2]`,
		"empty":  "\n\n",
	} {
		p := write(t, name+".ndjson", body+"\n")
		if _, err := openInput(t.Context(), p, fmtNDJSON, memory.DefaultAllocator, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestInputFormat(t *testing.T) {
	for path, want := range map[string]string{
		"a.parquet": fmtParquet, "a.PQ": fmtParquet, "a.csv": fmtCSV, "a.feather": fmtArrow, "a.arrow": fmtArrow,
		"a.ipc": fmtArrow, "a.arrows": fmtArrow, "a.jsonl": fmtNDJSON, "a.ndjson": fmtNDJSON,
	} {
		if got, err := inputFormat(path, ""); err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", path, got, err, want)
		}
	}
	if _, err := inputFormat("a.txt", ""); err == nil {
		t.Error("a.txt: no error")
	}
	if got, _ := inputFormat("a.txt", "csv"); got != fmtCSV {
		t.Error("--format csv ignored")
	}
}

func TestSameColumns(t *testing.T) {
	a := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	c := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	if err := sameColumns(a, b); err != nil {
		t.Fatalf("nullability only: %v", err)
	}
	if err := sameColumns(a, c); err == nil || !strings.Contains(err.Error(), `"id" is utf8, not int64`) {
		t.Fatalf("type change: %v", err)
	}
}

// A Parquet file's schema comes back as written: no PARQUET:field_id at
// any depth.
func TestParquetInputHasNoFieldIDs(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	md := arrow.NewMetadata([]string{"doc"}, []string{"row id"})
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64, Metadata: md},
		{Name: "l", Type: arrow.ListOf(arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true})), Nullable: true},
	}, nil)
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(`[{"a":1,"l":[{"x":2}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	p := filepath.Join(t.TempDir(), "a.parquet")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := codec.NewFileWriter(f, sc, codec.WriterOptions{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(fw.Close(), f.Close()); err != nil {
		t.Fatal(err)
	}
	got, cols := readAll(t, p, fmtParquet)
	if strings.Contains(got.String(), codec.FieldIDKey) || !got.Equal(sc) || !got.Field(0).Metadata.Equal(md) {
		t.Fatalf("schema\n%s\nwant\n%s", got, sc)
	}
	if cols[0][0] != "1" {
		t.Fatalf("a: %v", cols[0])
	}
}

func TestParseWhereAndVersion(t *testing.T) {
	w, rf, err := parseWhere([]string{"region=eu", "region=us", "day=2024-01-01", "x=", "total > 5", "note = 'a b'"})
	if err != nil {
		t.Fatal(err)
	}
	if rf == nil || rf.String() != "total > 5 and note = 'a b'" {
		t.Fatalf("row filter %v", rf)
	}
	if r, ok := w["region"].([]string); !ok || len(r) != 2 || w["day"] != "2024-01-01" || w["x"] != "" {
		t.Fatalf("%v", w)
	}
	if _, _, err := parseWhere([]string{"novalue"}); err == nil || !strings.Contains(err.Error(), "operator") {
		t.Fatalf("no error for col without an operator: %v", err)
	}
	for in, want := range map[string]any{"": nil, "latest": nil, "3": "v3", "v12": "v12"} {
		if got, err := parseVersion(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, bad := range []string{"v", "x3", "3a", "-1"} {
		if _, err := parseVersion(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestClientErrorIsOneLine(t *testing.T) {
	c := &connFlags{server: "localhost:8815"}
	err := clientError(status.Error(codes.NotFound, "store: profile not found: a/b"), c)
	if err.Error() != "store: profile not found: a/b" {
		t.Fatalf("%q", err)
	}
	err = clientError(status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing"`), c)
	if !strings.Contains(err.Error(), "cannot reach a quiver server at localhost:8815") {
		t.Fatalf("%q", err)
	}
	storage := `commit unavailable: p/q: the storage did not answer the commit; whether it committed is unknown: retry with the same request_id: s3fs: create "p/q/.log/1.ndjson": request failed: connection closed before the response was complete`
	if err = clientError(status.Error(codes.Unavailable, storage), c); err.Error() != storage {
		t.Fatalf("the server's storage error told as an unreachable server: %q", err)
	}
	wrapped := clientError(errors.Join(errors.New("x"), status.Error(codes.InvalidArgument, "bad")), c)
	if wrapped.Error() != "bad" {
		t.Fatalf("%q", wrapped)
	}
}

func TestFrameTable(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 22, 333}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"a\x1b[31m", "", "c"}, []bool{true, false, true})
	rec := b.NewRecordBatch()
	defer rec.Release()
	f := newFrame(sc, 2)
	f.add(rec)
	var out strings.Builder
	if err := f.write(&out, 1000, false); err != nil {
		t.Fatal(err)
	}
	want := "   id  s\n" +
		"int64  utf8\n" +
		"    1  a [31m\n" +
		"   22  null\n" +
		"1,000 rows × 2 columns (first 2 shown; -o FILE to save all)\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}
