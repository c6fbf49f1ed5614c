package codec

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Dictionary columns written. Parquet keeps a dictionary column as its
// values, dictionary-encoded per column chunk (one dictionary page per row
// group). arrow-go's pqarrow (v18.8) writes a dictionary array through that
// encoding only while every batch of the row group carries the dictionary
// of its first: on any other dictionary it falls back to PLAIN for the rest
// of the column chunk and casts each batch to its dense values, in one
// write, so one page, however large: a batch of 300 indices to one 1 MiB
// value became a 300 MiB page (over every reader's page limit) and 1.5 GB of
// memory (red team round 10's d02; compaction of two such files, d12).
// And each file kept the whole dictionary of the batches it got, used or
// not: every partition of a put held the batch's whole dictionary (d03).
//
// So the writer gives each row group one dictionary per byte-array
// dictionary leaf (dictUnifier): a batch whose values are all in it gets
// its indices transposed onto it; a batch with values it lacks is written
// as it is if its values are few, dense, with the row group's so far
// (cheapDense: pqarrow falls back to PLAIN for the rest of the column
// chunk, at a bounded cost), else starts a new row group, whose dictionary
// is that batch's with its duplicates merged and its unused values dropped
// (unless they are few, dictSlack). pqarrow then never expands more than
// a bounded multiple of what was sent, and no file holds dictionary values
// it does not use beyond that slack. As a last bound, a batch whose dictionary columns
// would still be written dense (fixed-size binary values, which pqarrow
// always casts) is written in slices of at most denseWriteBytes of values.

// dictSlack bounds the unused dictionary values (in bytes) a row group's
// dictionary keeps rather than compacting it, and only while they are no
// more than the bytes of the values its first batch uses: compacting a
// small shared dictionary would start a row group for each batch that uses
// one of its other values.
const dictSlack = 64 << 10

// dictKeep is how many bytes of unused values a row group's dictionary
// keeps however few rows use it: a small dictionary (a categorical's
// categories) stays whole, so that files appended with the same
// categories hold the same dictionary and are read joined (arrow-go cannot
// unify some dictionaries, large strings among them: DictionaryFit).
const dictKeep = 4 << 10

// denseWriteBytes bounds the dense values of the dictionary columns of one
// write, for those pqarrow writes dense.
const denseWriteBytes = 4 << 20

var dictHashSeed = maphash.MakeSeed()

// nullHash stands for a null dictionary value in dictLeaf's index.
const nullHash = 0x9e3779b97f4a7c15

// unifiable reports whether dictionaries of dt are written by pqarrow
// through Parquet's dictionary encoding (byte-array values: dictionary
// encoding is on only for them, see WriterProperties).
func unifiable(dt *arrow.DictionaryType) bool {
	return arrow.IsBaseBinary(dt.ValueType.ID())
}

// eachUnifiable calls fn with every byte-array dictionary leaf of d, in an
// order that is the same for every array of d's type.
func eachUnifiable(d arrow.ArrayData, fn func(leaf arrow.ArrayData)) {
	if t, ok := d.DataType().(*arrow.DictionaryType); ok {
		if unifiable(t) {
			fn(d)
		}
		return
	}
	for _, c := range d.Children() {
		eachUnifiable(c, fn)
	}
}

func hasUnifiable(dt arrow.DataType) bool {
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		return unifiable(t)
	case arrow.ExtensionType:
		return hasUnifiable(t.StorageType())
	case arrow.NestedType:
		for _, f := range t.Fields() {
			if hasUnifiable(f.Type) {
				return true
			}
		}
	}
	return false
}

// dictLeaf is the dictionary of one leaf in the open row group.
type dictLeaf struct {
	vals  arrow.Array      // nil until the row group's first batch
	index map[uint64]int32 // hash → first position in vals; nil until needed
	next  []int32          // position → next position of the same hash, or -1
	// The source dictionary last transposed onto vals, and its
	// positions' places in vals (-1 absent, -2 not looked up yet).
	src   arrow.ArrayData
	trans transTable
	// same: src is vals' own source, whole and in order.
	same bool
	// dense: the batch being written goes as it is, which makes pqarrow
	// write the row group's column chunk PLAIN from then on (plain).
	dense, plain bool
	// The batch's dense and sent bytes (denseSent; dense bounded from
	// above, exact where it decides), and the row group's.
	bDense, bSent, rgDense, rgSent int64
}

func (l *dictLeaf) release() {
	if l.vals != nil {
		l.vals.Release()
	}
	if l.src != nil {
		l.src.Release()
	}
	// The batch being written stays counted: it may start the next row
	// group.
	*l = dictLeaf{bDense: l.bDense, bSent: l.bSent}
}

// dictUnifier keeps the dictionaries of a row group being written (see
// the comment at the top of this file).
type dictUnifier struct {
	leaves []*dictLeaf
	mem    memory.Allocator
}

func newDictUnifier(sc *arrow.Schema, mem memory.Allocator) *dictUnifier {
	for _, f := range sc.Fields() {
		if hasUnifiable(f.Type) {
			return &dictUnifier{mem: mem}
		}
	}
	return nil
}

// reset starts a new row group.
func (u *dictUnifier) reset() {
	for _, l := range u.leaves {
		l.release()
	}
}

func (u *dictUnifier) leaf(k int) *dictLeaf {
	for len(u.leaves) <= k {
		u.leaves = append(u.leaves, &dictLeaf{})
	}
	return u.leaves[k]
}

// fits reports whether every value rec's dictionary leaves use is in the
// row group's dictionary of its leaf (or the leaf has none yet).
func (u *dictUnifier) fits(rec arrow.RecordBatch) bool {
	ok, k := true, 0
	for _, c := range rec.Columns() {
		eachUnifiable(c.Data(), func(d arrow.ArrayData) {
			l := u.leaf(k)
			k++
			l.dense = false
			l.bDense, l.bSent = denseSent(d, false)
			switch {
			case !ok || l.vals == nil && !l.plain:
			case !l.plain && l.transposable(d):
			case l.cheapDense(d):
				l.dense = true
			default:
				ok = false
			}
		})
	}
	return ok
}

// cheapDense reports whether the batch may be written as it is, dense,
// rather than start a row group: batches that each bring a few new small
// values (a dictionary made per batch) do not then cut a row group each.
// pqarrow's fallback to PLAIN re-encodes the values of the row group's
// unfinished page too, so the bound is on the row group's dense values
// with the batch's: at most 16 KiB, or 4 times the bytes of the
// dictionaries and indices sent for them.
func (l *dictLeaf) cheapDense(d arrow.ArrayData) bool {
	limit := max(16<<10, 4*(l.rgSent+l.bSent))
	if l.rgDense+l.bDense <= limit {
		return true
	}
	l.bDense, _ = denseSent(d, true)
	return l.bDense >= 0 && l.rgDense+l.bDense <= limit
}

// denseSent is a bound on the bytes of a dictionary leaf's values, dense
// (its valid rows times its dictionary's longest value; exact when exact
// is set, -1 if an index is out of bounds), and the bytes of its
// dictionary's values and indices.
func denseSent(d arrow.ArrayData, exact bool) (dense, sent int64) {
	arr, dict := dictOf(d)
	defer arr.Release()
	defer dict.Release()
	sent = int64(d.Len())*int64(d.DataType().(*arrow.DictionaryType).IndexType.(arrow.FixedWidthDataType).BitWidth()/8) + valueBytes(dict)
	if !exact {
		return int64(arr.Len()-arr.NullN()) * longest(dict), sent
	}
	val := binValues(dict)
	for i := 0; i < arr.Len(); i++ {
		if arr.IsValid(i) {
			j := arr.GetValueIndex(i)
			if j < 0 || j >= dict.Len() {
				return -1, sent
			}
			dense += int64(len(val(j)))
		}
	}
	return dense, sent
}

// longest is the length of the longest value of a string or binary array.
func longest(a arrow.Array) int64 {
	var n int64
	switch v := a.(type) {
	case interface{ ValueOffsets() []int32 }:
		o := v.ValueOffsets()
		for i := 1; i < len(o); i++ {
			n = max(n, int64(o[i]-o[i-1]))
		}
	case interface{ ValueOffsets() []int64 }:
		o := v.ValueOffsets()
		for i := 1; i < len(o); i++ {
			n = max(n, o[i]-o[i-1])
		}
	}
	return n
}

// valueBytes is the bytes of the values of a string or binary array.
func valueBytes(a arrow.Array) int64 {
	if a.Len() == 0 {
		return 0
	}
	switch v := a.(type) {
	case interface{ ValueOffsets() []int32 }:
		o := v.ValueOffsets()
		return int64(o[len(o)-1] - o[0])
	case interface{ ValueOffsets() []int64 }:
		o := v.ValueOffsets()
		return o[len(o)-1] - o[0]
	}
	return 0
}

// apply returns rec with each dictionary leaf on its row group's
// dictionary, setting those not set yet from rec. It takes over rec's
// reference.
func (u *dictUnifier) apply(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, rec.NumCols())
	changed := false
	k := 0
	var err error
	for i, c := range rec.Columns() {
		nd := u.applyData(c.Data(), &k, &err)
		if nd != c.Data() {
			changed = true
		}
		cols[i] = array.MakeFromData(nd)
		nd.Release()
	}
	if err != nil || !changed {
		releaseAll(cols)
		if err != nil {
			rec.Release()
			return nil, err
		}
		return rec, nil
	}
	out := array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
	releaseAll(cols)
	rec.Release()
	return out, nil
}

// applyData is apply for one array's data; it returns d retained when
// nothing under it changes.
func (u *dictUnifier) applyData(d arrow.ArrayData, k *int, errp *error) arrow.ArrayData {
	if t, ok := d.DataType().(*arrow.DictionaryType); ok {
		if !unifiable(t) || *errp != nil {
			d.Retain()
			return d
		}
		l := u.leaf(*k)
		*k++
		l.rgDense += max(0, l.bDense)
		l.rgSent += l.bSent
		if l.dense {
			l.plain = true
			d.Retain()
			return d
		}
		if l.vals == nil {
			if err := l.set(d, u.mem); err != nil {
				*errp = err
				d.Retain()
				return d
			}
		} else if !l.transposable(d) {
			*errp = errNotTransposable
			d.Retain()
			return d
		}
		return l.transpose(d, u.mem)
	}
	kids := d.Children()
	if len(kids) == 0 {
		d.Retain()
		return d
	}
	nk := make([]arrow.ArrayData, len(kids))
	changed := false
	for i, c := range kids {
		nk[i] = u.applyData(c, k, errp)
		changed = changed || nk[i] != c
	}
	if !changed {
		for _, c := range nk {
			c.Release()
		}
		d.Retain()
		return d
	}
	out := array.NewData(d.DataType(), d.Len(), d.Buffers(), nk, d.NullN(), d.Offset())
	for _, c := range nk {
		c.Release()
	}
	return out
}

type dictError string

func (e dictError) Error() string { return string(e) }

const (
	errNotTransposable = dictError("codec: a dictionary batch does not fit its row group's dictionary")
	errIndexBounds     = dictError("a dictionary index is out of its dictionary's bounds")
)

// binValues gives the values of a string or binary array by position,
// without copying.
func binValues(a arrow.Array) func(i int) string {
	switch v := a.(type) {
	case *array.String:
		return v.Value
	case *array.LargeString:
		return v.Value
	case *array.Binary:
		return func(i int) string { return bytesString(v.Value(i)) }
	case *array.LargeBinary:
		return func(i int) string { return bytesString(v.Value(i)) }
	}
	return nil
}

func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// dictOf is the dictionary (values) of a dictionary leaf, as an array (an
// empty one when the leaf has none), and its indices.
func dictOf(d arrow.ArrayData) (*array.Dictionary, arrow.Array) {
	arr := array.MakeFromData(d).(*array.Dictionary)
	if present(d.Dictionary()) {
		dict := arr.Dictionary()
		dict.Retain()
		return arr, dict
	}
	vt := d.DataType().(*arrow.DictionaryType).ValueType
	return arr, array.MakeArrayOfNull(memory.DefaultAllocator, vt, 0)
}

// transTable maps the positions of a source dictionary of n values to
// the leaf's (-1: absent; -2: not looked up yet): a slice of n, or, for a
// large dictionary of which a batch uses few values, a map of those
// looked up. A slice of the whole dictionary for every partition's file
// of a put cost 2 MB a partition for a 500,000-value dictionary, and its
// index as much again: 256 partitions of one 4,000-row batch peaked at
// 5.2 GiB (red team round 51's p01).
type transTable struct {
	n      int
	dense  []int32
	sparse map[int32]int32
}

// sparseTrans is the fewest positions a dictionary has for its
// transTable to be a map, when a batch uses at most 1/sparseRatio of them.
const (
	sparseTrans = 4096
	sparseRatio = 16
)

// newTrans returns a transTable of n positions, none looked up, for
// batches that use about uses of them.
func newTrans(n, uses int) transTable {
	if n >= sparseTrans && uses*sparseRatio < n {
		return transTable{n: n, sparse: make(map[int32]int32, uses)}
	}
	t := transTable{n: n, dense: make([]int32, n)}
	for j := range t.dense {
		t.dense[j] = -2
	}
	return t
}

func (t *transTable) get(j int) int32 {
	if t.dense != nil {
		return t.dense[j]
	}
	if v, ok := t.sparse[int32(j)]; ok {
		return v
	}
	return -2
}

func (t *transTable) set(j int, v int32) {
	if t.dense != nil {
		t.dense[j] = v
		return
	}
	t.sparse[int32(j)] = v
}

// usedPositions lists the dictionary positions the valid rows of arr use,
// each once, ascending, or reports that an index is out of the
// dictionary's bounds. It costs the rows, not the dictionary's n values:
// a few rows of a large dictionary are looked up in a map.
func usedPositions(arr *array.Dictionary, n int) ([]int32, bool) {
	var list []int32
	add := func(mark func(j int) bool) bool {
		for i := 0; i < arr.Len(); i++ {
			if arr.IsValid(i) {
				j := arr.GetValueIndex(i)
				if j < 0 || j >= n {
					return false
				}
				if mark(j) {
					list = append(list, int32(j))
				}
			}
		}
		return true
	}
	var ok bool
	if n <= 8*arr.Len()+64 {
		seen := make([]bool, n)
		ok = add(func(j int) bool {
			first := !seen[j]
			seen[j] = true
			return first
		})
	} else {
		seen := make(map[int32]struct{}, min(arr.Len(), n))
		ok = add(func(j int) bool {
			if _, ok := seen[int32(j)]; ok {
				return false
			}
			seen[int32(j)] = struct{}{}
			return true
		})
	}
	if !ok {
		return nil, false
	}
	slices.Sort(list)
	return list, true
}

// maxIndex is the largest index dt's index type holds (capped at int32's).
func maxIndex(dt *arrow.DictionaryType) int {
	switch dt.IndexType.ID() {
	case arrow.INT8:
		return 1<<7 - 1
	case arrow.UINT8:
		return 1<<8 - 1
	case arrow.INT16:
		return 1<<15 - 1
	case arrow.UINT16:
		return 1<<16 - 1
	}
	return 1<<31 - 1
}

// set makes the leaf's dictionary that of d: its values without
// duplicates, without the unused ones unless they are few (dictSlack), in
// their order.
func (l *dictLeaf) set(d arrow.ArrayData, mem memory.Allocator) error {
	arr, dict := dictOf(d)
	defer arr.Release()
	defer dict.Release()
	val := binValues(dict)
	n := dict.Len()
	used, ok := usedPositions(arr, n)
	if !ok {
		return errIndexBounds
	}
	var usedBytes, distinctBytes int64
	for i := 0; i < arr.Len(); i++ {
		if arr.IsValid(i) {
			usedBytes += int64(len(val(arr.GetValueIndex(i))))
		}
	}
	for _, j := range used {
		distinctBytes += int64(len(val(int(j))))
	}
	unusedBytes := valueBytes(dict) - distinctBytes
	// The whole dictionary is kept only if what its rows leave unused is
	// small in bytes and in values: a million empty or null values cost
	// nothing in bytes, but a table of them in every partition's file.
	keepAll := (unusedBytes <= dictKeep || unusedBytes <= min(dictSlack, usedBytes)) && n-len(used) <= dictKeep && n <= maxIndex(d.DataType().(*arrow.DictionaryType))+1
	uses := n // (the positions set looks up)
	if !keepAll {
		uses = len(used)
	}
	// The positions kept, each value once, and where each position goes.
	index := make(map[uint64]int32, uses)
	var next []int32
	trans := newTrans(n, uses)
	var keep []int32
	lookup := func(s string, null bool) int32 {
		h := maphash.String(dictHashSeed, s)
		if null {
			h = nullHash
		}
		for p, ok := index[h]; ok && p >= 0; p = next[p] {
			q := keep[p]
			if dict.IsNull(int(q)) == null && (null || val(int(q)) == s) {
				return p
			}
		}
		return -1
	}
	insert := func(s string, null bool, j int) int32 {
		h := maphash.String(dictHashSeed, s)
		if null {
			h = nullHash
		}
		p := int32(len(keep))
		keep = append(keep, int32(j))
		first, ok := index[h]
		if !ok {
			first = -1
		}
		next = append(next, first)
		index[h] = p
		return p
	}
	for k := range uses {
		j := k
		if !keepAll {
			j = int(used[k]) // (the others -2: looked up if a later batch uses them)
		}
		null := dict.IsNull(j)
		s := ""
		if !null {
			s = val(j)
		}
		if p := lookup(s, null); p >= 0 {
			trans.set(j, p)
			continue
		}
		trans.set(j, insert(s, null, j))
	}
	same := len(keep) == n
	if same {
		l.vals = dict
		dict.Retain()
	} else {
		ctx := compute.WithAllocator(context.Background(), mem)
		take := array.NewInt32Builder(mem)
		take.AppendValues(keep, nil)
		ta := take.NewArray()
		take.Release()
		vals, err := compute.TakeArray(ctx, dict, ta)
		ta.Release()
		if err != nil {
			return err
		}
		l.vals = vals
	}
	l.index, l.next = index, next
	if present(d.Dictionary()) {
		l.src = d.Dictionary()
		l.src.Retain()
		l.trans = trans
		l.same = same
	}
	return nil
}

// find is the position of value j of dict in the leaf's dictionary, or -1.
func (l *dictLeaf) find(dict arrow.Array, val func(int) string, j int) int32 {
	vv := binValues(l.vals)
	null := dict.IsNull(j)
	s := ""
	h := uint64(nullHash)
	if !null {
		s = val(j)
		h = maphash.String(dictHashSeed, s)
	}
	for p, ok := l.index[h]; ok && p >= 0; p = l.next[p] {
		if l.vals.IsNull(int(p)) == null && (null || vv(int(p)) == s) {
			return p
		}
	}
	return -1
}

// transposable reports whether every value d uses is in the leaf's
// dictionary, noting where each is.
func (l *dictLeaf) transposable(d arrow.ArrayData) bool {
	arr, dict := dictOf(d)
	defer arr.Release()
	defer dict.Release()
	src := d.Dictionary()
	if !present(src) {
		src = nil
	}
	if src == nil || src != l.src {
		if l.src != nil {
			l.src.Release()
			l.src = nil
		}
		l.same = false
		// A dictionary equal to the row group's is the common case:
		// compare once rather than look every value up.
		if dict.Len() == l.vals.Len() && array.Equal(dict, l.vals) {
			l.trans = transTable{n: dict.Len()} // (same: never looked at)
			l.same = true
		} else {
			l.trans = newTrans(dict.Len(), arr.Len())
		}
		if src != nil {
			src.Retain()
			l.src = src
		}
	}
	if l.same {
		return true
	}
	val := binValues(dict)
	for i := 0; i < arr.Len(); i++ {
		if !arr.IsValid(i) {
			continue
		}
		j := arr.GetValueIndex(i)
		if j < 0 || j >= l.trans.n {
			return false
		}
		t := l.trans.get(j)
		if t == -2 {
			t = l.find(dict, val, j)
			l.trans.set(j, t)
		}
		if t < 0 {
			return false
		}
	}
	return true
}

// transpose returns d with its indices onto the leaf's dictionary (after
// set or transposable said they fit), or d retained when they are already.
func (l *dictLeaf) transpose(d arrow.ArrayData, mem memory.Allocator) arrow.ArrayData {
	dt := d.DataType().(*arrow.DictionaryType)
	if l.same {
		d.Retain()
		return d
	}
	arr := array.MakeFromData(d).(*array.Dictionary)
	defer arr.Release()
	n := d.Len()
	w := dt.IndexType.(arrow.FixedWidthDataType).BitWidth() / 8
	idx := memory.NewResizableBuffer(mem)
	idx.Resize(n * w)
	b := idx.Bytes()
	for i := range n {
		v := 0
		if arr.IsValid(i) {
			v = int(l.trans.get(arr.GetValueIndex(i)))
		}
		switch w {
		case 1:
			b[i] = byte(v)
		case 2:
			binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
		case 4:
			binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
		case 8:
			binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
		}
	}
	var valid *memory.Buffer
	nulls := arr.NullN()
	if nulls > 0 {
		valid = memory.NewResizableBuffer(mem)
		valid.Resize(int(bitutil.BytesForBits(int64(n))))
		bitutil.CopyBitmap(d.Buffers()[0].Bytes(), d.Offset(), n, valid.Bytes(), 0)
	}
	out := array.NewData(dt, n, []*memory.Buffer{valid, idx}, nil, nulls, 0)
	out.SetDictionary(l.vals.Data())
	idx.Release()
	if valid != nil {
		valid.Release()
	}
	return out
}

// denseCuts gives the rows of rec before which a write must end so that no
// write holds more than denseWriteBytes of the values of its top-level
// dictionary columns that pqarrow writes dense (all but the byte-array
// ones: fixed-size binaries, decimals, numbers); nil when rec is within
// the bound.
func denseCuts(rec arrow.RecordBatch) []int64 {
	per := 0
	for _, c := range rec.Columns() {
		t, ok := c.DataType().(*arrow.DictionaryType)
		if !ok || unifiable(t) {
			continue
		}
		if f, ok := t.ValueType.(arrow.FixedWidthDataType); ok {
			per += max(1, f.BitWidth()/8)
		}
	}
	if per == 0 || int64(per)*rec.NumRows() <= denseWriteBytes {
		return nil
	}
	step := max(1, int64(denseWriteBytes/per))
	var cuts []int64
	for r := step; r < rec.NumRows(); r += step {
		cuts = append(cuts, r)
	}
	return cuts
}
