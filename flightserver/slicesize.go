package flightserver

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rangeSize estimates the bytes of the rows [off, off+n) of an array's
// data as an IPC message body holds them once sliced: validity, values,
// offsets and the value bytes the offsets span, children over the range
// their parents' offsets give. A dictionary's values are sent in their
// own message and not counted. Types it does not know are charged in
// proportion to their rows, as the whole array's buffers are.
func rangeSize(d arrow.ArrayData, off, n int64) int64 {
	if d == nil || n <= 0 {
		return 0
	}
	start := int64(d.Offset()) + off
	bufs := d.Buffers()
	var size int64
	if len(bufs) > 0 && bufs[0] != nil {
		size += (n + 7) / 8
	}
	switch t := d.DataType().(type) {
	case *arrow.BooleanType:
		return size + (n+7)/8
	case *arrow.StringType, *arrow.BinaryType:
		lo, hi, ok := offsets32(bufs, start, n)
		if !ok {
			break
		}
		return size + 4*(n+1) + (hi - lo)
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		lo, hi, ok := offsets64(bufs, start, n)
		if !ok {
			break
		}
		return size + 8*(n+1) + (hi - lo)
	case *arrow.ListType, *arrow.MapType:
		lo, hi, ok := offsets32(bufs, start, n)
		if !ok || len(d.Children()) != 1 {
			break
		}
		c := d.Children()[0]
		return size + 4*(n+1) + rangeSize(c, lo, hi-lo)
	case *arrow.LargeListType:
		lo, hi, ok := offsets64(bufs, start, n)
		if !ok || len(d.Children()) != 1 {
			break
		}
		c := d.Children()[0]
		return size + 8*(n+1) + rangeSize(c, lo, hi-lo)
	case *arrow.FixedSizeListType:
		if len(d.Children()) != 1 {
			break
		}
		k := int64(t.Len())
		c := d.Children()[0]
		return size + rangeSize(c, start*k, n*k)
	case *arrow.StructType:
		for _, c := range d.Children() {
			size += rangeSize(c, start, n)
		}
		return size
	case *arrow.DictionaryType:
		return size + n*int64(t.IndexType.(arrow.FixedWidthDataType).BitWidth()/8)
	case arrow.FixedWidthDataType:
		if w := t.BitWidth(); w >= 8 {
			return size + n*int64(w/8)
		}
	}
	if d.Len() == 0 {
		return 0
	}
	return dataSize(d) * n / int64(d.Len())
}

// offsets32 reads the int32 offsets at start and start+n of a list or
// binary array's offsets buffer (bufs[1]).
func offsets32(bufs []*memory.Buffer, start, n int64) (lo, hi int64, ok bool) {
	if len(bufs) < 2 || bufs[1] == nil || int64(bufs[1].Len()) < 4*(start+n+1) {
		return 0, 0, false
	}
	b := bufs[1].Bytes()
	return int64(int32(binary.LittleEndian.Uint32(b[4*start:]))), int64(int32(binary.LittleEndian.Uint32(b[4*(start+n):]))), true
}

// offsets64 is offsets32 for int64 offsets.
func offsets64(bufs []*memory.Buffer, start, n int64) (lo, hi int64, ok bool) {
	if len(bufs) < 2 || bufs[1] == nil || int64(bufs[1].Len()) < 8*(start+n+1) {
		return 0, 0, false
	}
	b := bufs[1].Bytes()
	return int64(binary.LittleEndian.Uint64(b[8*start:])), int64(binary.LittleEndian.Uint64(b[8*(start+n):])), true
}

// batchRangeSize is rangeSize over the columns of rec.
func batchRangeSize(rec arrow.RecordBatch, off, n int64) int64 {
	var size int64
	for _, c := range rec.Columns() {
		size += rangeSize(c.Data(), off, n)
	}
	return size
}

// sliceEnd is the end of the slice of rec that starts at off: as many
// rows as fit in target bytes (batchRangeSize), at least one.
func sliceEnd(rec arrow.RecordBatch, off, target int64) int64 {
	rows := rec.NumRows()
	if batchRangeSize(rec, off, rows-off) <= target {
		return rows
	}
	// The largest n with the rows [off, off+n) within target: sizes grow
	// with n, so a binary search (lo fits, hi does not).
	lo, hi := int64(1), rows-off
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if batchRangeSize(rec, off, mid) <= target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return off + lo
}
