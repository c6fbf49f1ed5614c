package codec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// The writer properties behind the write-path measurements: zstd at level 1
// (as pyarrow), dictionaries for byte arrays only, and small pages for
// partitioned writes, which keep one writer per partition open.
func TestWriterProperties(t *testing.T) {
	sc := schemaOf(field("id", arrow.PrimitiveTypes.Int64, false), field("name", arrow.BinaryTypes.String, false))
	for _, c := range []struct {
		o     WriterOptions
		codec compress.Compression
		level int
	}{
		{WriterOptions{}, compress.Codecs.Zstd, 1},
		{WriterOptions{Partitioned: true}, compress.Codecs.Zstd, 1},
		{WriterOptions{Compression: CompressionLZ4Raw}, compress.Codecs.Lz4Raw, compress.DefaultCompressionLevel},
		{WriterOptions{Compression: CompressionSnappy}, compress.Codecs.Snappy, compress.DefaultCompressionLevel},
		{WriterOptions{Compression: CompressionNone, RowGroupRows: 10}, compress.Codecs.Uncompressed, compress.DefaultCompressionLevel},
	} {
		p, err := WriterProperties(sc, c.o)
		if err != nil {
			t.Fatal(err)
		}
		for _, col := range []string{"id", "name"} {
			if got := p.CompressionFor(col); got != c.codec {
				t.Errorf("%+v %s: compression %v, want %v", c.o, col, got, c.codec)
			}
			if got := p.CompressionLevelFor(col); got != c.level {
				t.Errorf("%+v %s: level %d, want %d", c.o, col, got, c.level)
			}
		}
		if p.DictionaryEnabledFor("id") || !p.DictionaryEnabledFor("name") {
			t.Errorf("%+v: dictionary should be on for strings only", c.o)
		}
		wantPage, wantDict := int64(256<<10), int64(1<<20) // arrow-go's dictionary default
		if c.o.Partitioned {
			wantPage, wantDict = 64<<10, 256<<10
		}
		if p.DataPageSize() != wantPage || p.DictionaryPageSizeLimit() != wantDict {
			t.Errorf("%+v: page %d dict %d, want %d %d", c.o, p.DataPageSize(), p.DictionaryPageSizeLimit(), wantPage, wantDict)
		}
		wantRows := int64(DefaultRowGroupRows)
		if c.o.RowGroupRows > 0 {
			wantRows = c.o.RowGroupRows
		}
		if p.MaxRowGroupLength() != wantRows {
			t.Errorf("%+v: row groups of %d rows", c.o, p.MaxRowGroupLength())
		}
	}
	if _, err := WriterProperties(sc, WriterOptions{Compression: "brotli"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("brotli: %v", err)
	}
}

func TestParseFormatAndCompression(t *testing.T) {
	for in, want := range map[string]Format{"": FormatParquet, "Parquet": FormatParquet, "CSV": FormatCSV} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseFormat("json"); !errors.Is(err, ErrInvalid) {
		t.Errorf("json: %v", err)
	}
	for in, want := range map[string]Compression{"": CompressionZstd, "ZSTD": CompressionZstd, "lz4_raw": CompressionLZ4Raw,
		"snappy": CompressionSnappy, "none": CompressionNone, "uncompressed": CompressionNone} {
		if got, err := ParseCompression(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseCompression("lz4"); !errors.Is(err, ErrInvalid) {
		t.Errorf("lz4: %v", err)
	}
}

func TestFileWriterParquet(t *testing.T) {
	mem, ctx := checkedMem(t)
	md := arrow.NewMetadata([]string{"owner"}, []string{"sales"})
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: arrow.NewMetadata([]string{"doc"}, []string{"who"})},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, &md)
	var out bytes.Buffer
	fw, err := NewFileWriter(&out, sc, WriterOptions{Allocator: mem, Metadata: map[string]string{SchemaVersionKey: "7", "quiver.writer": "test"}})
	if err != nil {
		t.Fatal(err)
	}
	r1 := batch(t, mem, sc, `[{"id":1,"name":"a","tags":["x"]},{"id":2,"name":null,"tags":null}]`)
	defer r1.Release()
	r2 := batch(t, mem, sc, `[{"id":3,"name":"c","tags":[]}]`)
	defer r2.Release()
	for _, r := range []arrow.RecordBatch{r1, r2} {
		if err := fw.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if fw.Buffered() <= 0 || fw.Size() != 4 { // "PAR1" only: the row group is in memory
		t.Errorf("buffered %d, size %d before the row group ends", fw.Buffered(), fw.Size())
	}
	before := fw.Buffered()
	if err := fw.EndRowGroup(); err != nil {
		t.Fatal(err)
	}
	if fw.Buffered() >= before || fw.RowGroupBytes() != 0 || fw.Size() == 0 {
		t.Errorf("after EndRowGroup: buffered %d (was %d), row group %d, size %d", fw.Buffered(), before, fw.RowGroupBytes(), fw.Size())
	}
	if err := fw.AppendMetadata("quiver.request_id", "r1"); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(out.Bytes())
	if fw.Size() != int64(out.Len()) || fw.SHA256() != hex.EncodeToString(sum[:]) || fw.Rows() != 3 {
		t.Fatalf("size %d of %d, sha %s, rows %d", fw.Size(), out.Len(), fw.SHA256(), fw.Rows())
	}
	b := out.Bytes()
	ft, err := ReadFooter(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if ft.Rows != 3 || !ft.Quiver || ft.Metadata[SchemaVersionKey] != "7" || ft.Metadata["quiver.request_id"] != "r1" || ft.Metadata["quiver.writer"] != "test" {
		t.Fatalf("footer %+v", ft)
	}
	pf, err := OpenParquet(bytes.NewReader(b), int64(len(b)), ReadOptions{Allocator: mem, BatchRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if !pf.Schema().Equal(sc) || !pf.Schema().Field(1).Metadata.Equal(sc.Field(1).Metadata) || pf.Schema().Metadata().FindKey("owner") < 0 {
		t.Fatalf("schema read back\n%s\nwant\n%s", pf.Schema(), sc)
	}
	for _, c := range []struct {
		cols []string
		want string
	}{
		{[]string{"name", "id"}, `[{"id":1,"name":"a"},{"id":2,"name":null}]|[{"id":3,"name":"c"}]`},
		{[]string{"tags"}, `[{"tags":["x"]},{"tags":null}]|[{"tags":[]}]`},
		{[]string{}, `[{},{}]|[{}]`},
	} {
		rr, err := pf.Records(ctx, c.cols)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rr.Next() {
			if names := strings.Join(FieldNames(rr.RecordBatch().Schema()), ","); names != strings.Join(c.cols, ",") {
				t.Errorf("columns %s, want %v", names, c.cols)
			}
			got = append(got, rowsJSON(t, rr.RecordBatch()))
		}
		if rr.Err() != nil || strings.Join(got, "|") != c.want {
			t.Errorf("%v: got %s %v, want %s", c.cols, strings.Join(got, "|"), rr.Err(), c.want)
		}
		rr.Release()
	}
	if _, err := pf.Records(ctx, []string{"nope"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown column: %v", err)
	}
}

func TestFileWriterRowGroups(t *testing.T) {
	mem, ctx := checkedMem(t)
	sc := schemaOf(field("id", arrow.PrimitiveTypes.Int64, false), field("l", arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int64), true))
	rec := batch(t, mem, sc, `[{"id":1,"l":[1,1]},{"id":2,"l":[2,2]},{"id":3,"l":[3,3]},{"id":4,"l":[4,4]},{"id":5,"l":[5,5]}]`)
	defer rec.Release()
	b := writeFile(t, sc, WriterOptions{Allocator: mem, RowGroupRows: 2}, rec)
	pr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if pr.NumRowGroups() != 3 {
		t.Errorf("%d row groups, want 3", pr.NumRowGroups())
	}
	if got, want := readParquet(t, ctx, mem, b, sc), rowsJSON(t, rec); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// Valid Arrow that pqarrow (v18.8) writes wrong unless the FileWriter
// copies it first; found by FuzzValidateBatch.
func TestFileWriterLayoutsPqarrowMishandles(t *testing.T) {
	mem, ctx := checkedMem(t)
	fsl := arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int64)
	for _, c := range []struct {
		name string
		dt   arrow.DataType
		rows string
	}{
		{"sliced fixed-size list", fsl, `[{"c":[1,2]},{"c":[3,4]},{"c":[5,6]}]`},
		{"sliced struct of a fixed-size list", arrow.StructOf(field("f", fsl, true)), `[{"c":{"f":[1,2]}},{"c":{"f":[3,4]}},{"c":{"f":[5,6]}}]`},
		{"sliced fixed-size list of booleans", arrow.FixedSizeListOf(2, arrow.FixedWidthTypes.Boolean), `[{"c":[true,false]},{"c":[false,true]},{"c":[true,true]}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := schemaOf(field("c", c.dt, true))
			rec := batch(t, mem, sc, c.rows)
			defer rec.Release()
			sl := rec.NewSlice(1, 3)
			defer sl.Release()
			b := writeFile(t, sc, WriterOptions{Allocator: mem}, sl)
			if got, want := readParquet(t, ctx, mem, b, sc), rowsJSON(t, sl); got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
	t.Run("dictionary of strings with offsets from 1", func(t *testing.T) {
		vals := craftNoT(arrow.BinaryTypes.String, 2, []*memory.Buffer{nil, i32s(1, 2, 3), buf([]byte("xab"))})
		defer vals.Release()
		dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
		data := array.NewData(dt, 3, []*memory.Buffer{nil, buf([]byte{0, 1, 1})}, nil, 0, 0)
		data.SetDictionary(vals.Data())
		d := array.MakeFromData(data)
		data.Release()
		defer d.Release()
		rec := one("d", d, true)
		defer rec.Release()
		if err := ValidateBatch(rec); err != nil {
			t.Fatal(err)
		}
		b := writeFile(t, rec.Schema(), WriterOptions{Allocator: mem}, rec)
		if got := readParquet(t, ctx, mem, b, rec.Schema()); got != `[{"d":"a"},{"d":"b"},{"d":"b"}]` {
			t.Fatalf("got %s", got)
		}
	})
}

func craftNoT(dt arrow.DataType, n int, bufs []*memory.Buffer) arrow.Array {
	d := array.NewData(dt, n, bufs, nil, 0, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

func TestFileWriterCSV(t *testing.T) {
	mem, _ := checkedMem(t)
	sc := schemaOf(field("day", arrow.FixedWidthTypes.Date32, true), field("x", arrow.PrimitiveTypes.Float64, true),
		field("ok", arrow.FixedWidthTypes.Boolean, true), field("s", arrow.BinaryTypes.String, true))
	rec := batch(t, mem, sc, `[{"day":"2026-10-24","x":1,"ok":true,"s":"a,b"},{"day":null,"x":null,"ok":null,"s":null},{"day":"2026-10-25","x":1e300,"ok":false,"s":"q\"q"}]`)
	defer rec.Release()
	b := writeFile(t, sc, WriterOptions{Format: FormatCSV, Allocator: mem, Metadata: map[string]string{"ignored": "yes"}}, rec)
	want := "day,x,ok,s\n2026-10-24,1.0,true,\"a,b\"\n,,,\n2026-10-25,1e+300,false,\"q\"\"q\"\n"
	if string(b) != want {
		t.Fatalf("csv %q, want %q", b, want)
	}
	if empty := writeFile(t, sc, WriterOptions{Format: FormatCSV, Allocator: mem}); string(empty) != "day,x,ok,s\n" {
		t.Fatalf("empty csv %q", empty)
	}
	nested := schemaOf(field("l", arrow.ListOf(arrow.PrimitiveTypes.Int64), true))
	if _, err := NewFileWriter(io.Discard, nested, WriterOptions{Format: FormatCSV}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"l"`) {
		t.Errorf("nested CSV: %v", err)
	}
}

func TestCSVFloats(t *testing.T) {
	mem, _ := checkedMem(t)
	sc := schemaOf(field("x", arrow.PrimitiveTypes.Float64, true), field("y", arrow.PrimitiveTypes.Float32, true))
	rec := batch(t, mem, sc, `[{"x":1,"y":2},{"x":null,"y":null},{"x":2.5,"y":0.1},{"x":1e21,"y":-0}]`)
	defer rec.Release()
	got, ok := CSVFloats(arrow.PrimitiveTypes.Float64, rec.Column(0))
	if !ok || strings.Join(got, "|") != "1.0||2.5|1e+21" {
		t.Fatalf("float64 %q", got)
	}
	got, ok = CSVFloats(arrow.PrimitiveTypes.Float32, rec.Column(1))
	if !ok || strings.Join(got, "|") != "2.0||0.1|-0.0" {
		t.Fatalf("float32 %q", got)
	}
	// Infinities and NaN as polars writes and reads them.
	fb := array.NewFloat64Builder(mem)
	fb.AppendValues([]float64{posInf(), -posInf(), nan()}, nil)
	special := fb.NewArray()
	fb.Release()
	defer special.Release()
	got, _ = CSVFloats(arrow.PrimitiveTypes.Float64, special)
	if strings.Join(got, "|") != "inf|-inf|NaN" {
		t.Fatalf("special %q", got)
	}
	for _, v := range got {
		if csvValueKind(v) != kindFloat {
			t.Errorf("%q does not read back as a float", v)
		}
	}
	ints := batch(t, mem, schemaOf(field("i", arrow.PrimitiveTypes.Int64, true)), `[{"i":1}]`)
	defer ints.Release()
	if _, ok := CSVFloats(arrow.PrimitiveTypes.Int64, ints.Column(0)); ok {
		t.Error("CSVFloats took an int column")
	}
}

// failingWriter fails with ENOSPC after n bytes.
type failingWriter struct{ n int }

func (w *failingWriter) Write(b []byte) (int, error) {
	if len(b) > w.n {
		k := w.n
		w.n = 0
		return k, syscall.ENOSPC
	}
	w.n -= len(b)
	return len(b), nil
}

// An error of the io.Writer is the disk's; one of the encoder is the
// data's (ErrInvalid).
func TestFileWriterClassifiesErrors(t *testing.T) {
	mem, _ := checkedMem(t)
	sc := schemaOf(field("id", arrow.PrimitiveTypes.Int64, true))
	rec := batch(t, mem, sc, `[{"id":1},{"id":2}]`)
	defer rec.Release()
	fw, err := NewFileWriter(&failingWriter{n: 10}, sc, WriterOptions{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	err = fw.Write(rec)
	if err == nil {
		err = fw.Close()
	}
	fw.Abort()
	if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrInvalid) {
		t.Fatalf("disk full: %v", err)
	}

	csvw, err := NewFileWriter(&failingWriter{n: 3}, sc, WriterOptions{Format: FormatCSV, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := csvw.Write(rec); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("CSV disk full: %v", err)
	}
	csvw.Abort()

	// An error of the encoder (not of the writer) is the data's: arrow-go
	// v18.8 refused a fixed_size_list with a null slot between valid ones
	// this way; v18.9 writes it (store's TestFixedSizeListNullSlotRoundTrips).
	fw, err = NewFileWriter(io.Discard, sc, WriterOptions{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	err = fw.classify(errors.New("non-zero length null components"))
	fw.Abort()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "cannot be stored as Parquet") {
		t.Fatalf("unstorable data: %v", err)
	}

	union := schemaOf(field("u", arrow.SparseUnionOf([]arrow.Field{field("a", arrow.PrimitiveTypes.Int64, true)}, []arrow.UnionTypeCode{0}), true))
	if _, err := NewFileWriter(io.Discard, union, WriterOptions{Allocator: mem}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("union: %v", err)
	}
	var sink bytes.Buffer
	fw, err = NewFileWriter(&sink, sc, WriterOptions{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	other := schemaOf(field("l", arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int64), true))
	bad := batch(t, mem, other, `[{"l":[1,2]}]`)
	defer bad.Release()
	if err := fw.Write(bad); err == nil || errors.Is(err, ErrInvalid) {
		t.Fatalf("a batch of another schema: %v", err)
	}
	fw.Abort()
}

// A batch without columns still has rows; Parquet has nowhere to keep
// them, so the writer counts them for the caller's record.
func TestFileWriterZeroColumns(t *testing.T) {
	mem, ctx := checkedMem(t)
	sc := arrow.NewSchema(nil, nil)
	rec := array.NewRecordBatch(sc, nil, 3)
	defer rec.Release()
	var out bytes.Buffer
	fw, err := NewFileWriter(&out, sc, WriterOptions{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if fw.Rows() != 3 {
		t.Fatalf("rows %d", fw.Rows())
	}
	err = eachBatch(t, ctx, out.Bytes(), ReadOptions{Allocator: mem}, func(rec arrow.RecordBatch) {
		if rec.NumCols() != 0 {
			t.Fatal("columns from nowhere")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
