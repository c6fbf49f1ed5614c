package flightserver

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/internal/arrowtest"
)

// floatDictBatch is a batch of one column, a dictionary of float64 (or
// float32) holding the value of bits, used by two rows.
func floatDictBatch(t *testing.T, f32 bool, bits uint64) arrow.RecordBatch {
	t.Helper()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.PrimitiveTypes.Float64}
	if f32 {
		dt.ValueType = arrow.PrimitiveTypes.Float32
	}
	col := arrowtest.FloatDictionary(memory.DefaultAllocator, dt, bits, 2)
	defer col.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: dt, Nullable: true}}, nil)
	return array.NewRecordBatch(sc, []arrow.Array{col}, 2)
}

// putMode puts rec into path with mode (write or append).
func putMode(t *testing.T, c flight.Client, path, mode string, rec arrow.RecordBatch) {
	t.Helper()
	putCmd(t, c, map[string]any{"path": path, "mode": mode}, rec)
}

// TestDoGetFloatDictionariesBitExact: batches whose float dictionaries
// differ only in the sign of zero, a NaN payload or less than 1e-5 come
// back each with its own values. arrow-go's IPC writer took them for the
// dictionary it had sent already and did not send them (red team round
// 10's d01: 0.0 read back as -0.0), and the store's reader, which joins
// small batches for DoGet, merged them too (array.Concatenate).
func TestDoGetFloatDictionariesBitExact(t *testing.T) {
	cases := []struct {
		name string
		f32  bool
		a, b uint64
	}{
		{"zero then negative zero", false, 0, 1 << 63},
		{"negative zero then zero", false, 1 << 63, 0},
		{"within 1e-5", false, math.Float64bits(1), math.Float64bits(1.000001)},
		{"NaN payloads", false, 0x7FF8000000000001, 0x7FF8000000000002},
		{"float32 zeros", true, 0, 1 << 31},
		{"float32 NaN payloads", true, 0x7FC00001, 0x7FC00002},
	}
	{
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				cl, _ := start(t)
				for i, bits := range []uint64{c.a, c.b} {
					rec := floatDictBatch(t, c.f32, bits)
					mode := "write"
					if i > 0 {
						mode = "append"
					}
					putMode(t, cl, "f/d", mode, rec)
					rec.Release()
				}
				stream, err := cl.DoGet(context.Background(), &flight.Ticket{Ticket: []byte("f/d")})
				if err != nil {
					t.Fatal(err)
				}
				rdr, err := flight.NewRecordReader(stream)
				if err != nil {
					t.Fatal(err)
				}
				defer rdr.Release()
				var got []uint64
				for rdr.Next() {
					d := rdr.RecordBatch().Column(0).(*array.Dictionary)
					for i := 0; i < d.Len(); i++ {
						switch v := d.Dictionary().(type) {
						case *array.Float64:
							got = append(got, math.Float64bits(v.Value(d.GetValueIndex(i))))
						case *array.Float32:
							got = append(got, uint64(math.Float32bits(v.Value(d.GetValueIndex(i)))))
						}
					}
				}
				if err := rdr.Err(); err != nil {
					t.Fatal(err)
				}
				want := []uint64{c.a, c.a, c.b, c.b}
				if !slices.Equal(got, want) {
					t.Fatalf("read back bits %x, want %x", got, want)
				}
			})
		}
	}
}
