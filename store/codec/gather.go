package codec

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// gatherBatch returns the rows idx of rec, in that order, as a new batch
// (schema sc, rec's columns). Fixed-width columns, booleans and
// strings/binaries are gathered directly, each output buffer allocated
// once at its final size; other columns go through compute.Take, whose
// string kernel grows its output step by step (it was a fifth of a
// 64-partition put's CPU).
func gatherBatch(ctx context.Context, sc *arrow.Schema, rec arrow.RecordBatch, idx []int32) (arrow.RecordBatch, error) {
	mem := compute.GetAllocator(ctx)
	cols := make([]arrow.Array, rec.NumCols())
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	var rest []int // columns for compute.Take
	for i, c := range rec.Columns() {
		if g := gather(mem, c, idx); g != nil {
			cols[i] = g
		} else {
			rest = append(rest, i)
		}
	}
	if len(rest) > 0 {
		buf := memory.NewResizableBuffer(mem)
		buf.Resize(len(idx) * arrow.Int32SizeBytes)
		copy(arrow.Int32Traits.CastFromBytes(buf.Bytes()), idx)
		indices := array.NewInt32Data(array.NewData(arrow.PrimitiveTypes.Int32, len(idx), []*memory.Buffer{nil, buf}, nil, 0, 0))
		buf.Release()
		defer indices.Data().Release()
		defer indices.Release()
		for _, i := range rest {
			taken, err := compute.TakeArray(ctx, rec.Column(i), indices)
			if err != nil {
				release()
				return nil, fmt.Errorf("split by partition: %w", err)
			}
			cols[i] = taken
		}
	}
	for i := range cols {
		cols[i] = asType(cols[i], sc.Field(i).Type)
	}
	out := array.NewRecordBatch(sc, cols, int64(len(idx)))
	release()
	return out, nil
}

// asType returns a (its reference taken) labelled with dt, an equal type
// that may be another instance: arrow.TypeEqual compares dictionary types
// with reflect.DeepEqual, which finds two equal timestamp types different
// once one of them has cached its time zone (GetZone), so a column of
// dictionaries of timestamps could fail array.NewRecordBatch's check
// against its own schema and panic (red team round 11 r02).
func asType(a arrow.Array, dt arrow.DataType) arrow.Array {
	if a.DataType() == dt {
		return a
	}
	d := a.Data()
	var out arrow.ArrayData
	if dict, ok := d.Dictionary().(*array.Data); ok && dict != nil { // (a nil *Data is a non-nil ArrayData)
		out = array.NewDataWithDictionary(dt, d.Len(), d.Buffers(), d.NullN(), d.Offset(), dict)
	} else {
		out = array.NewData(dt, d.Len(), d.Buffers(), d.Children(), d.NullN(), d.Offset())
	}
	a.Release()
	defer out.Release()
	return array.MakeFromData(out)
}

// gather returns the rows idx of arr as a new array, or nil for a layout
// it does not gather itself.
func gather(mem memory.Allocator, arr arrow.Array, idx []int32) arrow.Array {
	d := arr.Data()
	if len(d.Children()) > 0 || present(d.Dictionary()) {
		return nil
	}
	n := len(idx)
	off := d.Offset()
	bufs := d.Buffers()
	var validity *memory.Buffer
	nulls := 0
	if arr.NullN() > 0 {
		validity = memory.NewResizableBuffer(mem)
		validity.Resize(int(bitutil.BytesForBits(int64(n))))
		vb := validity.Bytes()
		for k := range vb {
			vb[k] = 0
		}
		for k, j := range idx {
			if arr.IsValid(int(j)) {
				bitutil.SetBit(vb, k)
			} else {
				nulls++
			}
		}
	}
	newData := func(buffers ...*memory.Buffer) arrow.Array {
		all := append([]*memory.Buffer{validity}, buffers...)
		nd := array.NewData(arr.DataType(), n, all, nil, nulls, 0)
		for _, b := range all {
			if b != nil {
				b.Release()
			}
		}
		a := array.MakeFromData(nd)
		nd.Release()
		return a
	}
	switch dt := arr.DataType().(type) {
	case *arrow.BooleanType:
		vals := memory.NewResizableBuffer(mem)
		vals.Resize(int(bitutil.BytesForBits(int64(n))))
		out := vals.Bytes()
		for k := range out {
			out[k] = 0
		}
		src := bufs[1].Bytes()
		for k, j := range idx {
			if bitutil.BitIsSet(src, off+int(j)) {
				bitutil.SetBit(out, k)
			}
		}
		return newData(vals)
	case *arrow.StringType, *arrow.BinaryType:
		offs := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())[off:]
		var src []byte
		if bufs[2] != nil {
			src = bufs[2].Bytes()
		}
		total := 0
		for _, j := range idx {
			total += int(offs[j+1] - offs[j])
		}
		ob := memory.NewResizableBuffer(mem)
		ob.Resize((n + 1) * arrow.Int32SizeBytes)
		vb := memory.NewResizableBuffer(mem)
		vb.Resize(total)
		o, v := arrow.Int32Traits.CastFromBytes(ob.Bytes()), vb.Bytes()
		pos := int32(0)
		for k, j := range idx {
			o[k] = pos
			pos += int32(copy(v[pos:], src[offs[j]:offs[j+1]]))
		}
		o[n] = pos
		return newData(ob, vb)
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		offs := arrow.Int64Traits.CastFromBytes(bufs[1].Bytes())[off:]
		var src []byte
		if bufs[2] != nil {
			src = bufs[2].Bytes()
		}
		total := int64(0)
		for _, j := range idx {
			total += offs[j+1] - offs[j]
		}
		ob := memory.NewResizableBuffer(mem)
		ob.Resize((n + 1) * arrow.Int64SizeBytes)
		vb := memory.NewResizableBuffer(mem)
		vb.Resize(int(total))
		o, v := arrow.Int64Traits.CastFromBytes(ob.Bytes()), vb.Bytes()
		pos := int64(0)
		for k, j := range idx {
			o[k] = pos
			pos += int64(copy(v[pos:], src[offs[j]:offs[j+1]]))
		}
		o[n] = pos
		return newData(ob, vb)
	case arrow.FixedWidthDataType:
		if _, ext := arr.DataType().(arrow.ExtensionType); ext || len(bufs) != 2 || dt.BitWidth()%8 != 0 || dt.BitWidth() == 0 {
			break
		}
		w := dt.BitWidth() / 8
		vals := memory.NewResizableBuffer(mem)
		vals.Resize(n * w)
		out := vals.Bytes()
		var src []byte
		if bufs[1] != nil {
			src = bufs[1].Bytes()[off*w:]
		}
		switch w {
		case 8:
			s, o := arrow.Int64Traits.CastFromBytes(src), arrow.Int64Traits.CastFromBytes(out)
			for k, j := range idx {
				o[k] = s[j]
			}
		case 4:
			s, o := arrow.Int32Traits.CastFromBytes(src), arrow.Int32Traits.CastFromBytes(out)
			for k, j := range idx {
				o[k] = s[j]
			}
		default:
			for k, j := range idx {
				copy(out[k*w:(k+1)*w], src[int(j)*w:int(j+1)*w])
			}
		}
		return newData(vals)
	}
	if validity != nil {
		validity.Release()
	}
	return nil
}
