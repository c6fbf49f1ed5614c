package codec

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// strings builds a string array of n values, value(i) or null where it
// returns ok false.
func stringsOf(mem memory.Allocator, n int, value func(i int) (string, bool)) arrow.Array {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	for i := range n {
		if v, ok := value(i); ok {
			b.Append(v)
		} else {
			b.AppendNull()
		}
	}
	return b.NewArray()
}

func TestDictionaryPays(t *testing.T) {
	mem := memory.NewGoAllocator()
	uuids := func(n int) arrow.Array {
		b := extensions.NewUUIDBuilder(mem)
		defer b.Release()
		for i := range n {
			var u [16]byte
			u[0], u[1], u[15] = byte(i), byte(i>>8), 7
			b.Append(u)
		}
		return b.NewArray()
	}
	bins := func(n, distinct int) arrow.Array {
		b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		defer b.Release()
		for i := range n {
			b.Append([]byte{byte(i % distinct), 1, 2})
		}
		return b.NewArray()
	}
	ints := func(n int) arrow.Array {
		b := array.NewInt64Builder(mem)
		defer b.Release()
		for i := range n {
			b.Append(int64(i))
		}
		return b.NewArray()
	}
	for _, c := range []struct {
		name string
		arr  arrow.Array
		want bool
	}{
		{"unique strings", stringsOf(mem, 1000, func(i int) (string, bool) { return fmt.Sprintf("tok-%08x", i*2654435761), true }), false},
		{"unique, most of a large batch unsampled", stringsOf(mem, 100_000, func(i int) (string, bool) { return fmt.Sprint(i), true }), false},
		{"name-%d mod 997 of 1,000 (the append benchmark)", stringsOf(mem, 1000, func(i int) (string, bool) { return fmt.Sprintf("name-%d", i%997), true }), false},
		{"unique with half null", stringsOf(mem, 2000, func(i int) (string, bool) { return fmt.Sprint(i), i%2 == 0 }), false},
		{"50 categories", stringsOf(mem, 1000, func(i int) (string, bool) { return fmt.Sprint("cat", i%50), true }), true},
		{"600 values spread over 1,000", stringsOf(mem, 1000, func(i int) (string, bool) { return fmt.Sprint(i * 7919 % 600), true }), true},
		{"1% repeats: still plain", stringsOf(mem, 20_000, func(i int) (string, bool) { return fmt.Sprint(i - i%100/99), true }), false},
		{"too few values to judge", stringsOf(mem, 20, func(i int) (string, bool) { return fmt.Sprint(i), true }), true},
		{"all null", stringsOf(mem, 1000, func(int) (string, bool) { return "", false }), true},
		{"unique uuids (extension over fixed-size binary)", uuids(500), false},
		{"binaries of 10 values", bins(1000, 10), true},
		{"unique binaries", bins(200, 200), false},
		{"numbers keep their encoding", ints(1000), true},
	} {
		if got := dictionaryPays(c.arr); got != c.want {
			t.Errorf("%s: dictionaryPays = %v, want %v", c.name, got, c.want)
		}
		c.arr.Release()
	}
}

// TestFirstBatchChoosesDictionaries: a file's unique string column is
// written plain, its repetitive one with a dictionary, metadata added
// before the first batch reaches the footer, and the values read back.
func TestFirstBatchChoosesDictionaries(t *testing.T) {
	mem, ctx := checkedMem(t)
	sc := schemaOf(field("id", arrow.BinaryTypes.String, false), field("cat", arrow.BinaryTypes.String, true), field("n", arrow.PrimitiveTypes.Int64, false))
	const n = 5000
	ids := stringsOf(mem, n, func(i int) (string, bool) { return fmt.Sprintf("id-%d", i), true })
	cats := stringsOf(mem, n, func(i int) (string, bool) { return fmt.Sprint("c", i%7), i%5 != 0 })
	nb := array.NewInt64Builder(mem)
	for i := range n {
		nb.Append(int64(i))
	}
	nums := nb.NewArray()
	nb.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{ids, cats, nums}, n)
	ids.Release()
	cats.Release()
	nums.Release()
	defer rec.Release()
	for _, serial := range []bool{false, true} {
		var buf bytes.Buffer
		fw, err := NewFileWriter(&buf, sc, WriterOptions{Serial: serial, Metadata: map[string]string{"k1": "v1"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := fw.AppendMetadata("k2", "v2"); err != nil {
			t.Fatal(err)
		}
		if err := fw.Write(rec); err != nil {
			t.Fatal(err)
		}
		r := closeAndOpen(t, fw, &buf)
		md := r.MetaData()
		for i, want := range []bool{false, true, false} {
			cc, err := md.RowGroup(0).ColumnChunk(i)
			if err != nil {
				t.Fatal(err)
			}
			if got := cc.HasDictionaryPage(); got != want {
				t.Errorf("serial %v: column %s has a dictionary page: %v, want %v", serial, sc.Field(i).Name, got, want)
			}
		}
		for _, k := range []string{"k1", "k2"} {
			if md.KeyValueMetadata().FindValue(k) == nil {
				t.Errorf("serial %v: footer lacks %s", serial, k)
			}
		}
		_ = r.Close()
		back := readBack(t, ctx, mem, buf.Bytes(), sc)
		if got, want := rowsJSON(t, back), rowsJSON(t, rec); got != want {
			t.Errorf("serial %v: read back differs", serial)
		}
		back.Release()
	}
}

// An empty file (no batch) still gets its footer and metadata.
func TestEmptyFileStartsAtClose(t *testing.T) {
	sc := schemaOf(field("s", arrow.BinaryTypes.String, true))
	var buf bytes.Buffer
	fw, err := NewFileWriter(&buf, sc, WriterOptions{Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	r := closeAndOpen(t, fw, &buf)
	defer r.Close()
	if r.NumRows() != 0 || r.MetaData().KeyValueMetadata().FindValue("k") == nil {
		t.Errorf("empty file: %d rows, metadata %v", r.NumRows(), r.MetaData().KeyValueMetadata())
	}
}

// closeAndOpen closes fw, which wrote into buf, and opens the file.
func closeAndOpen(t *testing.T, fw *FileWriter, buf *bytes.Buffer) *file.Reader {
	t.Helper()
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
