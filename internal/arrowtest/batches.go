package arrowtest

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// FloatDictionary is a column of dt (a dictionary of float16, float32 or
// float64 values) of rows rows, each pointing at the dictionary's one
// value, whose bits are bits (the low 16 or 32 of them for the narrower
// floats): 0.0 and -0.0, or two NaN payloads, differ here.
func FloatDictionary(mem memory.Allocator, dt *arrow.DictionaryType, bits uint64, rows int) arrow.Array {
	var vals arrow.Array
	switch dt.ValueType.ID() {
	case arrow.FLOAT16:
		b := array.NewFloat16Builder(mem)
		b.Append(float16.FromBits(uint16(bits)))
		vals = b.NewArray()
		b.Release()
	case arrow.FLOAT32:
		b := array.NewFloat32Builder(mem)
		b.Append(math.Float32frombits(uint32(bits)))
		vals = b.NewArray()
		b.Release()
	default:
		b := array.NewFloat64Builder(mem)
		b.Append(math.Float64frombits(bits))
		vals = b.NewArray()
		b.Release()
	}
	defer vals.Release()
	ib := array.NewBuilder(mem, dt.IndexType)
	for range rows {
		if err := ib.AppendValueFromString("0"); err != nil {
			panic(err) // not an integer index type
		}
	}
	idx := ib.NewArray()
	ib.Release()
	defer idx.Release()
	return array.NewDictionaryArray(dt, idx, vals)
}
