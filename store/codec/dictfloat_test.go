package codec

import (
	"fmt"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// floatsOf builds a float array of type dt from bit patterns; ^0 is null.
func floatsOf(mem memory.Allocator, dt arrow.DataType, bits ...uint64) arrow.Array {
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	for _, x := range bits {
		if x == ^uint64(0) {
			b.AppendNull()
			continue
		}
		switch b := b.(type) {
		case *array.Float64Builder:
			b.Append(math.Float64frombits(x))
		case *array.Float32Builder:
			b.Append(math.Float32frombits(uint32(x)))
		case *array.Float16Builder:
			b.Append(float16.FromBits(uint16(x)))
		}
	}
	return b.NewArray()
}

// floatBits is value i of a float array (or a dictionary of floats) as
// its bits; ^0 for null.
func floatBits(a arrow.Array, i int) uint64 {
	if d, ok := a.(*array.Dictionary); ok {
		if d.IsNull(i) {
			return ^uint64(0)
		}
		return floatBits(d.Dictionary(), d.GetValueIndex(i))
	}
	if a.IsNull(i) {
		return ^uint64(0)
	}
	switch a := a.(type) {
	case *array.Float64:
		return math.Float64bits(a.Value(i))
	case *array.Float32:
		return uint64(math.Float32bits(a.Value(i)))
	case *array.Float16:
		return uint64(a.Value(i).Uint16())
	}
	panic(a.DataType())
}

// TestFloatDictionariesBitExact: floats dictionary-encoded (as the reader
// does with the float dictionary columns pqarrow reads dense) keep every
// bit: 0.0 and -0.0 apart, each NaN payload its own; and batches whose
// float dictionaries are not bit for bit the same, or hold a NaN, are not
// joined (array.Concatenate merges them). Red team round 10's d01.
func TestFloatDictionariesBitExact(t *testing.T) {
	types := []struct {
		dt   arrow.DataType
		bits []uint64 // 0.0, -0.0, two NaN payloads, 1, null, -0.0
	}{
		{arrow.PrimitiveTypes.Float64, []uint64{0, 1 << 63, 0x7FF8000000000001, 0x7FF8000000000002, math.Float64bits(1), ^uint64(0), 1 << 63}},
		{arrow.PrimitiveTypes.Float32, []uint64{0, 1 << 31, 0x7FC00001, 0x7FC00002, uint64(math.Float32bits(1)), ^uint64(0), 1 << 31}},
		{arrow.FixedWidthTypes.Float16, []uint64{0, 1 << 15, 0x7E01, 0x7E02, 0x3C00, ^uint64(0), 1 << 15}},
	}
	for _, tc := range types {
		for _, it := range []arrow.DataType{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Int64} {
			t.Run(fmt.Sprintf("encode/%s/%s", tc.dt, it), func(t *testing.T) {
				mem, ctx := checkedMem(t)
				dense := floatsOf(mem, tc.dt, tc.bits...)
				defer dense.Release()
				enc, err := ConformArray(ctx, dense, &arrow.DictionaryType{IndexType: it, ValueType: tc.dt})
				if err != nil {
					t.Fatal(err)
				}
				defer enc.Release()
				if n := enc.(*array.Dictionary).Dictionary().Len(); n != 5 {
					t.Errorf("dictionary of %d values, want 5", n)
				}
				for i, want := range tc.bits {
					if got := floatBits(enc, i); got != want {
						t.Errorf("value %d: bits %x, want %x", i, got, want)
					}
				}
			})
		}
		t.Run(fmt.Sprintf("join/%s", tc.dt), func(t *testing.T) {
			mem, _ := checkedMem(t)
			dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: tc.dt}
			sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.ListOf(dt), Nullable: true}}, nil)
			// a batch of one list holding the dictionary's one value
			rec := func(bits uint64) arrow.RecordBatch {
				vals := floatsOf(mem, tc.dt, bits)
				defer vals.Release()
				idx := array.NewInt32Builder(mem)
				defer idx.Release()
				idx.Append(0)
				ia := idx.NewArray()
				defer ia.Release()
				d := array.NewDictionaryArray(dt, ia, vals)
				defer d.Release()
				offs := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{0, 1}))
				ld := array.NewData(sc.Field(0).Type, 1, []*memory.Buffer{nil, offs}, []arrow.ArrayData{d.Data()}, 0, 0)
				defer ld.Release()
				l := array.MakeFromData(ld)
				defer l.Release()
				return array.NewRecordBatch(sc, []arrow.Array{l}, 1)
			}
			for _, c := range []struct {
				a, b uint64
				join bool
			}{
				{tc.bits[0], tc.bits[0], true},
				{tc.bits[4], tc.bits[4], true},
				{tc.bits[0], tc.bits[1], false}, // 0.0, -0.0
				{tc.bits[2], tc.bits[3], false}, // NaN payloads
				{tc.bits[2], tc.bits[2], false}, // a NaN: the unifier would see it
				{tc.bits[0], tc.bits[4], false},
			} {
				a, b := rec(c.a), rec(c.b)
				fit := NewDictionaryFit(sc)
				if fit == nil {
					t.Fatal("no DictionaryFit for a schema of float dictionaries")
				}
				fit.Reset()
				fit.Add(a)
				if got := fit.Add(b); got != c.join {
					t.Errorf("%x then %x: joined %v, want %v", c.a, c.b, got, c.join)
				}
				fit.Reset() // (releases the first batch's dictionaries it holds)
				a.Release()
				b.Release()
			}
		})
	}
}
