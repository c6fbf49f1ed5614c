package codec

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// checkedMem returns a checked allocator that fails the test if anything
// allocated through it is still held when the test ends, and a context
// whose compute kernels allocate from it.
func checkedMem(t testing.TB) (*memory.CheckedAllocator, context.Context) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem, compute.WithAllocator(context.Background(), mem)
}

// batch builds a record batch from JSON rows.
func batch(t testing.TB, mem memory.Allocator, sc *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(rows))
	if err != nil {
		t.Fatalf("rows %s: %v", rows, err)
	}
	return rec
}

// rowsJSON renders a batch as JSON rows, a logical view: values under null
// parents do not show.
func rowsJSON(t testing.TB, rec arrow.RecordBatch) string {
	t.Helper()
	b, err := rec.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "")
}

func schemaOf(fields ...arrow.Field) *arrow.Schema { return arrow.NewSchema(fields, nil) }

func field(name string, dt arrow.DataType, nullable bool) arrow.Field {
	return arrow.Field{Name: name, Type: dt, Nullable: nullable}
}

// writeFile encodes recs with a FileWriter and returns the bytes.
func writeFile(t testing.TB, sc *arrow.Schema, o WriterOptions, recs ...arrow.RecordBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	fw, err := NewFileWriter(&buf, sc, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := fw.Write(r); err != nil {
			fw.Abort()
			t.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readBack decodes a Parquet file, conformed to sc, as one batch.
func readBack(t testing.TB, ctx context.Context, mem memory.Allocator, b []byte, sc *arrow.Schema) arrow.RecordBatch {
	t.Helper()
	chunks := make([][]arrow.Array, sc.NumFields())
	defer func() {
		for _, c := range chunks {
			releaseAll(c)
		}
	}()
	var rows int64
	err := eachBatch(t, ctx, b, ReadOptions{Allocator: mem, BatchRows: 3}, func(rec arrow.RecordBatch) {
		rows += rec.NumRows()
		for i, f := range sc.Fields() {
			c, err := ConformArray(ctx, rec.Column(i), f.Type)
			if err != nil {
				t.Fatalf("column %q: %v", f.Name, err)
			}
			chunks[i] = append(chunks[i], c)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	cols := make([]arrow.Array, sc.NumFields())
	for i, f := range sc.Fields() {
		if len(chunks[i]) == 0 {
			cols[i] = array.MakeArrayOfNull(mem, f.Type, 0)
			continue
		}
		c, err := array.Concatenate(chunks[i], mem)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
	}
	defer releaseAll(cols)
	return array.NewRecordBatch(sc, cols, rows)
}

// eachBatch decodes a Parquet file with o and calls fn with each batch;
// the read's error, if any, is returned.
func eachBatch(t testing.TB, ctx context.Context, b []byte, o ReadOptions, fn func(arrow.RecordBatch)) error {
	t.Helper()
	pf, err := OpenParquet(bytes.NewReader(b), int64(len(b)), o)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	rr, err := pf.Records(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	for rr.Next() {
		fn(rr.RecordBatch())
	}
	return rr.Err()
}

// readParquet decodes a Parquet file, conformed to sc, as JSON rows.
func readParquet(t testing.TB, ctx context.Context, mem memory.Allocator, b []byte, sc *arrow.Schema) string {
	t.Helper()
	rec := readBack(t, ctx, mem, b, sc)
	defer rec.Release()
	return rowsJSON(t, rec)
}

// sameValues compares two arrays value by value, as a reader sees them:
// what lies under a null does not count, an empty binary is an empty
// binary however its buffers look, NaN equals NaN.
func sameValues(a, b arrow.Array) bool {
	if a.Len() != b.Len() {
		return false
	}
	for i := 0; i < a.Len(); i++ {
		if !sameValue(a, i, b, i) {
			return false
		}
	}
	return true
}

func sameValue(a arrow.Array, i int, b arrow.Array, j int) bool {
	if a.IsNull(i) != b.IsNull(j) {
		return false
	}
	if a.IsNull(i) {
		return true
	}
	switch x := a.(type) {
	case *array.Dictionary:
		y := b.(*array.Dictionary)
		return sameValue(x.Dictionary(), x.GetValueIndex(i), y.Dictionary(), y.GetValueIndex(j))
	case *array.Struct:
		y := b.(*array.Struct)
		for k := 0; k < x.NumField(); k++ {
			if !sameValue(x.Field(k), i, y.Field(k), j) {
				return false
			}
		}
		return true
	case array.ListLike:
		y := b.(array.ListLike)
		s1, e1 := x.ValueOffsets(i)
		s2, e2 := y.ValueOffsets(j)
		if e1-s1 != e2-s2 {
			return false
		}
		for k := int64(0); k < e1-s1; k++ {
			if !sameValue(x.ListValues(), int(s1+k), y.ListValues(), int(s2+k)) {
				return false
			}
		}
		return true
	case *array.Float64:
		u, v := x.Value(i), b.(*array.Float64).Value(j)
		return u == v || (u != u && v != v)
	}
	return array.SliceEqual(a, int64(i), int64(i+1), b, int64(j), int64(j+1))
}

func posInf() float64 { return math.Inf(1) }
func nan() float64    { return math.NaN() }
