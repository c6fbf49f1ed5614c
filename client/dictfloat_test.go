package client_test

import (
	"math"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/internal/arrowtest"
)

// floatDictRec is a batch of sc's one column, a dictionary of float64
// holding the value of bits, used by two rows.
func floatDictRec(sc *arrow.Schema, bits uint64) arrow.RecordBatch {
	col := arrowtest.FloatDictionary(memory.DefaultAllocator, sc.Field(0).Type.(*arrow.DictionaryType), bits, 2)
	defer col.Release()
	return array.NewRecordBatch(sc, []arrow.Array{col}, 2)
}

// TestPutFloatDictionariesBitExact: one put whose batches' float
// dictionaries differ only in the sign of zero, a NaN payload or by less
// than 1e-5 stores each batch's own values. arrow-go's IPC writer, which
// the client sent with, took each for the dictionary it had sent already
// and did not send it: the server decoded the later batches with the
// first batch's values (0.0 stored as -0.0, 1.000001 as 1).
func TestPutFloatDictionariesBitExact(t *testing.T) {
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.PrimitiveTypes.Float64}
	sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: dt, Nullable: true}}, nil)
	sent := []uint64{
		0, 1 << 63, // 0.0, -0.0
		math.Float64bits(1), math.Float64bits(1.000001),
		0x7FF8000000000001, 0x7FF8000000000002, // NaN payloads
		0x7FF8000000000002, // the same again: no new dictionary needed
	}
	s := startServer(t)
	c := connect(t, s.addr)
	var recs []arrow.RecordBatch
	for _, bits := range sent {
		recs = append(recs, floatDictRec(sc, bits))
	}
	rdr, err := array.NewRecordReader(sc, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
	defer rdr.Release()
	if _, err := c.Put(ctxT(t), "f/d", rdr, client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := c.Read(ctxT(t), client.ReadRequest{Path: "f/d"})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	var got []uint64
	for out.Next() {
		col := out.RecordBatch().Column(0)
		for i := 0; i < col.Len(); i++ {
			switch a := col.(type) {
			case *array.Dictionary:
				got = append(got, math.Float64bits(a.Dictionary().(*array.Float64).Value(a.GetValueIndex(i))))
			case *array.Float64:
				got = append(got, math.Float64bits(a.Value(i)))
			default:
				t.Fatalf("read back a column of %s", col.DataType())
			}
		}
	}
	if err := out.Err(); err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for _, b := range sent {
		want = append(want, b, b)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read back bits %x\nwant %x", got, want)
	}
}
