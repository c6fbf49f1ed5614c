package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TestGetParquetSink: `quiver get -o x.parquet` writes what it is given
// exactly, as the store's writer does: a null held in a dictionary's values
// read back as a null (pqarrow's writer alone refuses it, or, in a
// multi-column file, writes it as a value), a list of dictionaries holding
// no value, batches with differing dictionaries, and the schema's
// metadata.
func TestGetParquetSink(t *testing.T) {
	str := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "d", Type: str, Nullable: true},
		{Name: "l", Type: arrow.ListOf(str), Nullable: true},
		{Name: "x", Type: arrow.PrimitiveTypes.Int64},
	}, func() *arrow.Metadata { m := arrow.NewMetadata([]string{"owner"}, []string{"sales"}); return &m }())
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	// Batch 1: dictionary ["a", null, "b"] with an index on the null.
	vals, _, err := array.FromJSON(mem, arrow.BinaryTypes.String, strings.NewReader(`["a", null, "b"]`))
	if err != nil {
		t.Fatal(err)
	}
	defer vals.Release()
	idx, _, _ := array.FromJSON(mem, arrow.PrimitiveTypes.Int8, strings.NewReader(`[0, 1, 2]`))
	defer idx.Release()
	d1 := array.NewDictionaryArray(str, idx, vals)
	defer d1.Release()
	l1, _, err := array.FromJSON(mem, arrow.ListOf(str), strings.NewReader(`[[], null, []]`))
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Release()
	x1, _, _ := array.FromJSON(mem, arrow.PrimitiveTypes.Int64, strings.NewReader(`[1, 2, 3]`))
	defer x1.Release()
	rec1 := array.NewRecordBatch(sc, []arrow.Array{d1, l1, x1}, 3)
	defer rec1.Release()
	// Batch 2: another dictionary.
	rec2, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(`[{"d":"z","l":["q"],"x":4},{"d":null,"l":[],"x":5}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Release()

	var buf bytes.Buffer
	sk, err := newSink(outParquet, &buf, sc, mem)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []arrow.RecordBatch{rec1, rec2} {
		if err := sk.write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := sk.close(); err != nil {
		t.Fatal(err)
	}

	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 10}, memory.NewGoAllocator())
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	fsc, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := fsc.Metadata().GetValue("owner"); !ok || v != "sales" {
		t.Errorf("metadata %v", fsc.Metadata())
	}
	got := make([]string, 0, 5)
	tr := array.NewTableReader(tbl, 1<<10)
	defer tr.Release()
	for tr.Next() {
		b, err := tr.RecordBatch().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.TrimSpace(string(b)))
	}
	want := `[{"d":"a","l":[],"x":1}
,{"d":null,"l":null,"x":2}
,{"d":"b","l":[],"x":3}
,{"d":"z","l":["q"],"x":4}
,{"d":null,"l":[],"x":5}
]`
	if j := strings.ReplaceAll(strings.Join(got, ""), "\n", ""); j != strings.ReplaceAll(want, "\n", "") {
		t.Errorf("read back:\n%s\nwant\n%s", j, want)
	}
}
