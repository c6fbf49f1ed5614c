package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TestNarrowDictionaries writes batches of narrow dictionary columns
// whose dictionaries differ and together hold more values than the index
// type addresses (each batch fits on its own), and reads them back: the
// values must be exact, in the declared types, and every row group must
// fit its index (as pyarrow needs). Red team round 9's r03: uint8 indices
// wrapped (wrong values), int8 ones were out of bounds.
func TestNarrowDictionaries(t *testing.T) {
	dict := func(idx arrow.DataType) *arrow.DictionaryType {
		return &arrow.DictionaryType{IndexType: idx, ValueType: arrow.BinaryTypes.String}
	}
	str := func(b, i int) string { return fmt.Sprintf("%q", fmt.Sprintf("b%d_%d", b, i)) }
	for _, c := range []struct {
		name     string
		dt       arrow.DataType
		distinct int // values per batch
		value    func(b, i int) string
	}{
		{"uint8", dict(arrow.PrimitiveTypes.Uint8), 200, str},
		{"int8", dict(arrow.PrimitiveTypes.Int8), 100, str},
		{"int8 with nulls", dict(arrow.PrimitiveTypes.Int8), 128, func(b, i int) string {
			if i%7 == 3 {
				return "null"
			}
			return str(b, i)
		}},
		{"uint16", dict(arrow.PrimitiveTypes.Uint16), 40000, str},
		{"list of uint8", arrow.ListOf(dict(arrow.PrimitiveTypes.Uint8)), 150, func(b, i int) string {
			return "[" + str(b, i) + ", " + str(b, (i+1)%150) + "]"
		}},
		{"struct of int8", arrow.StructOf(arrow.Field{Name: "s", Type: dict(arrow.PrimitiveTypes.Int8), Nullable: true}), 100, func(b, i int) string {
			return `{"s": ` + str(b, i) + "}"
		}},
	} {
		sc := schemaOf(field("id", arrow.PrimitiveTypes.Int64, false), field("d", c.dt, true))
		mem, ctx := checkedMem(t)
		var recs []arrow.RecordBatch
		var want []any
		id := 0
		for b := range 3 {
			var rows []string
			for i := range c.distinct * 3 / 2 {
				rows = append(rows, fmt.Sprintf(`{"id": %d, "d": %s}`, id, c.value(b, i%c.distinct)))
				id++
			}
			rec := batch(t, mem, sc, "["+strings.Join(rows, ",")+"]")
			recs = append(recs, rec)
			want = append(want, jsonRows(t, rec)...)
		}
		for _, serial := range []bool{false, true} {
			name := fmt.Sprintf("%s/serial=%v", c.name, serial)
			b := writeFile(t, sc, WriterOptions{Serial: serial}, recs...)
			pr, err := file.NewParquetReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if n := pr.NumRowGroups(); n < 3 {
				t.Errorf("%s: %d row groups, want one per batch (each fits its index)", name, n)
			}
			pr.Close()
			for _, batchRows := range []int64{int64(c.distinct / 20), 1 << 20} {
				var got []any
				err := eachBatch(t, ctx, b, ReadOptions{Allocator: mem, BatchRows: batchRows, Parallel: 2}, func(rec arrow.RecordBatch) {
					if !rec.Schema().Equal(sc) {
						t.Fatalf("%s: read schema %s, want %s", name, rec.Schema(), sc)
					}
					got = append(got, jsonRows(t, rec)...)
				})
				if err != nil {
					t.Errorf("%s, batches of %d: %v", name, batchRows, err)
				}
				if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
					t.Errorf("%s, batches of %d: %d rows read differ from the %d written", name, batchRows, len(got), len(want))
				}
			}
		}
		for _, r := range recs {
			r.Release()
		}
	}
}

// jsonRows is rec's rows as decoded JSON values.
func jsonRows(t testing.TB, rec arrow.RecordBatch) []any {
	t.Helper()
	var rows []any
	if err := json.Unmarshal([]byte(rowsJSON(t, rec)), &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestNarrowDictionaryEdges: a batch whose own dictionary is longer than
// its index addresses (valid Arrow: the indices use only part of it), a
// file written by another writer whose one row group holds more values
// than the index (pyarrow writes such files), and DictionaryFit, which
// tells the store's reader when batches read may be joined.
func TestNarrowDictionaryEdges(t *testing.T) {
	mem, ctx := checkedMem(t)
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint8, ValueType: arrow.BinaryTypes.String}
	sc := schemaOf(field("d", dt, true))
	// build: rows values, index i%used into a dictionary of size values
	// named by batch b.
	build := func(b, rows, used, size int) arrow.RecordBatch {
		ib := array.NewUint8Builder(mem)
		defer ib.Release()
		for i := range rows {
			ib.Append(uint8(i % used))
		}
		idx := ib.NewArray()
		defer idx.Release()
		vals := stringsOf(mem, size, func(i int) (string, bool) { return fmt.Sprintf("b%d_%d", b, i), true })
		defer vals.Release()
		d := array.NewDictionaryArray(dt, idx, vals)
		defer d.Release()
		return array.NewRecordBatch(sc, []arrow.Array{d}, int64(rows))
	}
	check := func(name string, b []byte, recs ...arrow.RecordBatch) {
		t.Helper()
		var want []any
		for _, r := range recs {
			want = append(want, jsonRows(t, r)...)
		}
		var got []any
		fit := NewDictionaryFit(sc)
		joinable := 0
		err := eachBatch(t, ctx, b, ReadOptions{Allocator: mem, BatchRows: 1 << 20}, func(rec arrow.RecordBatch) {
			if fit.Add(rec) {
				joinable++
			}
			got = append(got, jsonRows(t, rec)...)
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: the values read differ from those written", name)
		}
		if joinable != 1 {
			t.Errorf("%s: DictionaryFit let %d batches join, want only the first", name, joinable)
		}
	}

	long := build(0, 300, 200, 1000) // a dictionary of 1000, 200 used
	other := build(1, 300, 200, 200)
	check("a long dictionary", writeFile(t, sc, WriterOptions{}, long, other), long, other)

	// Two batches in one row group, as pyarrow writes them.
	third := build(2, 300, 200, 200)
	tbl := array.NewTableFromRecords(sc, []arrow.RecordBatch{other, third})
	defer tbl.Release()
	var buf bytes.Buffer
	if err := pqarrow.WriteTable(tbl, &buf, 1<<20, nil, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err != nil {
		t.Fatal(err)
	}
	check("one row group outgrowing uint8", buf.Bytes(), other, third)
	for _, r := range []arrow.RecordBatch{long, other, third} {
		r.Release()
	}
	if NewDictionaryFit(schemaOf(field("s", arrow.BinaryTypes.String, true))) != nil {
		t.Error("DictionaryFit for a schema without narrow dictionaries")
	}
}

// TestDictionaryFitJoins checks DictionaryFit against what it predicts:
// array.Concatenate of the batches it lets join must succeed, and batches
// it must let join do. arrow-go's unifier allows one value less than a
// narrow index addresses and has no memo table for large strings and
// binaries (red team round 10's d05, d06, d11).
func TestDictionaryFitJoins(t *testing.T) {
	mem, _ := checkedMem(t)
	dict := func(t *testing.T, idx, vt arrow.DataType, n int, prefix string) arrow.Array {
		var vals, ix []string
		for i := range n {
			v := fmt.Sprint(prefix, i)
			if vt.ID() == arrow.LARGE_BINARY {
				v = base64.StdEncoding.EncodeToString([]byte(v))
			}
			vals = append(vals, `"`+v+`"`)
			ix = append(ix, fmt.Sprint(i))
		}
		v, _, err := array.FromJSON(mem, vt, strings.NewReader("["+strings.Join(vals, ",")+"]"))
		if err != nil {
			t.Fatal(err)
		}
		defer v.Release()
		i, _, err := array.FromJSON(mem, idx, strings.NewReader("["+strings.Join(ix, ",")+"]"))
		if err != nil {
			t.Fatal(err)
		}
		defer i.Release()
		return array.NewDictionaryArray(&arrow.DictionaryType{IndexType: idx, ValueType: vt}, i, v)
	}
	i8, u8, i32 := arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Int32
	str, lstr, lbin := arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.LargeBinary
	cases := []struct {
		name   string
		idx    arrow.DataType
		vt     arrow.DataType
		sizes  []int // each batch's dictionary: n values of its own, -n the same in every batch
		nested bool
		joins  []bool // Add's answer for each batch after the first
	}{
		{"int8 127", i8, str, []int{120, 7}, false, []bool{true}},
		{"int8 128", i8, str, []int{123, 5}, false, []bool{false}},
		{"int8 128 nested", i8, str, []int{123, 5}, true, []bool{false}},
		{"int8 alone full", i8, str, []int{128, 0, 1}, false, []bool{false, true}},
		{"uint8 255", u8, str, []int{250, 5}, true, []bool{true}},
		{"uint8 256", u8, str, []int{250, 6}, false, []bool{false}},
		{"int32 string", i32, str, []int{300, 300}, true, []bool{true}},
		{"large_string", i8, lstr, []int{2, 1}, false, []bool{false}},
		{"large_string int32 nested", i32, lstr, []int{2, 1}, true, []bool{false}},
		{"large_binary", i32, lbin, []int{2, 1}, false, []bool{false}},
		// The same dictionary (a categorical's categories): concatenated
		// as it is, not unified.
		{"large_string same", i32, lstr, []int{-2, -2, -2}, true, []bool{true, true}},
		{"large_string same narrow", i8, lstr, []int{-60, -60, -60}, false, []bool{true, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var recs []arrow.RecordBatch
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			for i, n := range tc.sizes {
				prefix := fmt.Sprint("b", i, "_")
				if n < 0 { // -n values, the same in every batch
					n, prefix = -n, "same"
				}
				var c arrow.Array = dict(t, tc.idx, tc.vt, n, prefix)
				if tc.nested {
					st := arrow.StructOf(arrow.Field{Name: "d", Type: c.DataType(), Nullable: true})
					d := array.NewData(st, c.Len(), []*memory.Buffer{nil}, []arrow.ArrayData{c.Data()}, 0, 0)
					c.Release()
					c = array.MakeFromData(d)
					d.Release()
				}
				sc := arrow.NewSchema([]arrow.Field{{Name: "c", Type: c.DataType(), Nullable: true}}, nil)
				recs = append(recs, array.NewRecordBatch(sc, []arrow.Array{c}, int64(c.Len())))
				c.Release()
			}
			f := NewDictionaryFit(recs[0].Schema())
			if f == nil && slices.Contains(tc.joins, false) {
				t.Fatal("no DictionaryFit for a schema whose batches may not join")
			}
			f.Reset()
			defer f.Reset() // it holds dictionaries of the first batch
			if !f.Add(recs[0]) {
				t.Fatal("the first batch does not join itself")
			}
			joined := []arrow.Array{recs[0].Column(0)}
			for i, r := range recs[1:] {
				if got := f.Add(r); got != tc.joins[i] {
					t.Fatalf("batch %d: Add %v, want %v", i+1, got, tc.joins[i])
				}
				if !tc.joins[i] {
					break
				}
				joined = append(joined, r.Column(0))
			}
			a, err := array.Concatenate(joined, mem)
			if err != nil {
				t.Fatalf("batches DictionaryFit joins do not concatenate: %v", err)
			}
			a.Release()
		})
	}
}
