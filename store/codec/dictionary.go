package codec

import (
	"hash/maphash"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// dictSample is how many values of a column dictionaryPays looks at, and
// dictDistinct the share of them (in 1/16ths) that must be distinct for
// the dictionary to be judged useless.
const (
	dictSample   = 256
	dictDistinct = 15 // 15/16: about 94%
)

// dictSeed seeds the hashes of dictionaryPays; collisions only make a
// column look a little less distinct than it is.
var dictSeed = maphash.MakeSeed()

// plainColumns lists the top-level columns of rec (a file's first batch)
// whose dictionary encoding would not pay: string, binary and fixed-size
// binary columns whose values are nearly all distinct (ids, tokens,
// hashes, free text). Such a dictionary is as large as the data and adds
// an index to every value, and hashing every value costs a third of a
// string column's encoding (measured on the benchmark's puts: 16% of a
// 64-partition put, 14% of the server CPU of 1,000-row appends). arrow-go
// and pyarrow keep the dictionary until it outgrows its page limit, then
// fall back to plain; parquet-mr decides after the first page, as this
// does after a sample of the first batch.
func plainColumns(rec arrow.RecordBatch) []string {
	var out []string
	for i, col := range rec.Columns() {
		if !dictionaryPays(col) {
			out = append(out, rec.ColumnName(i))
		}
	}
	return out
}

// dictionaryPays reports whether arr's values repeat enough for a
// dictionary: true unless at least 15/16 of up to dictSample of its
// non-null values, spread over arr, are distinct. Columns of other types
// (and too few values to judge) answer true: their encoding is left as
// it was.
func dictionaryPays(arr arrow.Array) bool {
	if e, ok := arr.(array.ExtensionArray); ok {
		arr = e.Storage()
	}
	var hash func(i int) uint64
	switch a := arr.(type) {
	case *array.String:
		hash = func(i int) uint64 { return maphash.String(dictSeed, a.Value(i)) }
	case *array.LargeString:
		hash = func(i int) uint64 { return maphash.String(dictSeed, a.Value(i)) }
	case *array.Binary:
		hash = func(i int) uint64 { return maphash.Bytes(dictSeed, a.Value(i)) }
	case *array.LargeBinary:
		hash = func(i int) uint64 { return maphash.Bytes(dictSeed, a.Value(i)) }
	case *array.FixedSizeBinary:
		hash = func(i int) uint64 { return maphash.Bytes(dictSeed, a.Value(i)) }
	default:
		return true
	}
	n := arr.Len()
	if n-arr.NullN() < 32 {
		return true
	}
	step := max(1, n/dictSample)
	var (
		set     [2 * dictSample]uint64 // open addressing; 0 is empty
		sampled int
		dups    int
	)
	// The dictionary pays once more than 1/16 of the sample repeats.
	for i := 0; i < n && sampled < dictSample; i += step {
		if arr.IsNull(i) {
			continue
		}
		sampled++
		h := hash(i) | 1
		for k := h % uint64(len(set)); ; k = (k + 1) % uint64(len(set)) {
			if set[k] == 0 {
				set[k] = h
				break
			}
			if set[k] == h {
				dups++
				if dups*16 > dictSample*(16-dictDistinct) {
					return true
				}
				break
			}
		}
	}
	return sampled < 32 || dups*16 > sampled*(16-dictDistinct)
}

// CompleteDictionaries returns arr (retained) with every dictionary array
// in it, at any depth, given an empty dictionary where it has none and an
// empty index buffer where it has none. pqarrow (v18.8) reads a dictionary
// of no values (a list<dictionary> whose lists are all empty or null) with
// no dictionary, and Arrow IPC gives no buffer to no indices;
// array.Concatenate (joining a read's batches), Take and pqarrow's
// dictionary encoder dereference them (red team round 10's d09 and d10).
// A dictionary array of no rows is also given an empty validity bitmap
// (see incompleteDict).
func CompleteDictionaries(arr arrow.Array, mem memory.Allocator) arrow.Array {
	if !incompleteDict(arr.Data()) {
		arr.Retain()
		return arr
	}
	d := completeDicts(arr.Data(), mem)
	defer d.Release()
	return array.MakeFromData(d)
}

// incompleteDict reports whether d holds, at any depth, a dictionary array
// without its dictionary or without its index buffer, or of no rows and
// no validity bitmap: array.Concatenate (v18.8) transposes such indices
// with its AVX2 kernel, which takes the address of their first element and
// of the first of an empty dictionary's transposition, and panics.
func incompleteDict(d arrow.ArrayData) bool {
	if d.DataType().ID() == arrow.DICTIONARY {
		if b := d.Buffers(); !present(d.Dictionary()) || len(b) < 2 || b[1] == nil || (d.Len() == 0 && b[0] == nil) {
			return true
		}
	}
	for _, c := range d.Children() {
		if incompleteDict(c) {
			return true
		}
	}
	return false
}

func completeDicts(d arrow.ArrayData, mem memory.Allocator) arrow.ArrayData {
	if !incompleteDict(d) {
		d.Retain()
		return d
	}
	kids := make([]arrow.ArrayData, len(d.Children()))
	for i, c := range d.Children() {
		kids[i] = completeDicts(c, mem)
	}
	bufs := d.Buffers()
	dt, isDict := d.DataType().(*arrow.DictionaryType)
	if isDict {
		bufs = indexBuffers(d)
		if d.Len() == 0 && bufs[0] == nil {
			bufs = slices.Clone(bufs)
			bufs[0] = memory.NewBufferBytes(make([]byte, 0, 8))
		}
	}
	nd := array.NewData(d.DataType(), d.Len(), bufs, kids, d.NullN(), d.Offset())
	for _, k := range kids {
		k.Release()
	}
	if isDict {
		if dict := d.Dictionary(); present(dict) {
			nd.SetDictionary(dict)
		} else {
			empty := array.MakeArrayOfNull(mem, dt.ValueType, 0)
			nd.SetDictionary(empty.Data())
			empty.Release()
		}
	}
	return nd
}
