package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// byteArrayReader decodes one flat BYTE_ARRAY column (a string or binary
// column that is not nested) straight from its pages into Arrow arrays:
// the page reader of arrow-go reads, checks and decompresses the pages,
// and this reader decodes their levels and values. arrow-go's column
// reader turns each value into a slice and appends it to a builder one by
// one, which made half the CPU of a full read of string-heavy data; here a
// dictionary index is one bounds check and one copy.
//
// It handles what Parquet writers write for such columns: data pages v1
// and v2, definition levels in RLE, values PLAIN or dictionary encoded
// (RLE_DICTIONARY, PLAIN_DICTIONARY) with a PLAIN dictionary page.
// byteArrayEligible tells from the footer whether a column is such; a page
// that is not (a file whose footer lies) is an error, never a panic: the
// bytes come from files anyone who can write the data directory made.
type byteArrayReader struct {
	refs   atomic.Int64
	pr     *file.Reader
	col    int   // leaf index
	groups []int // row groups to read, in order
	next   int   // index into groups of the next row group
	maxDef int16
	large  bool // int64 offsets
	// checkUTF8: the Arrow type says string but the Parquet column is not
	// annotated as one, so its bytes are checked (an Arrow string array
	// must hold UTF-8).
	checkUTF8 bool
	batch     int64
	mem       memory.Allocator
	schema    *arrow.Schema

	pages file.PageReader
	// The current row group's dictionary: its values, end to end, and
	// where each ends (dictEnd[i] is the end of value i).
	dict     []byte
	dictEnd  []uint32
	haveDict bool
	// The current data page.
	left   int // values (levels) of it not yet decoded
	defs   rleDecoder
	plain  []byte // PLAIN values not yet decoded
	idx    rleDecoder
	isDict bool

	cur     arrow.RecordBatch
	err     error
	avgSize float64 // bytes per value seen so far (sizes the data buffer)
	scratch []uint32
	levels  []uint32
}

// byteArrayEligible reports whether leaf col of pr, read as field f,
// can be read by a byteArrayReader over rowGroups (nil: all).
func byteArrayEligible(pr *file.Reader, col int, f arrow.Field, rowGroups []int) bool {
	switch f.Type.ID() {
	case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
	default:
		return false
	}
	md := pr.MetaData()
	if col < 0 || col >= md.Schema.NumColumns() {
		return false
	}
	d := md.Schema.Column(col)
	if d.PhysicalType() != parquet.Types.ByteArray || d.MaxRepetitionLevel() != 0 || d.MaxDefinitionLevel() > 1 {
		return false
	}
	for _, rg := range allGroups(pr, rowGroups) {
		cc, err := md.RowGroup(rg).ColumnChunk(col)
		if err != nil || cc.CryptoMetadata() != nil {
			return false
		}
		for _, e := range cc.Encodings() {
			switch e {
			case parquet.Encodings.Plain, parquet.Encodings.RLE, parquet.Encodings.RLEDict, parquet.Encodings.PlainDict:
			default:
				return false
			}
		}
	}
	return true
}

// byteArrayReaders counts the byteArrayReaders made (tests check that
// they ran).
var byteArrayReaders atomic.Int64

// allGroups is rowGroups, or every row group of pr when it is nil.
func allGroups(pr *file.Reader, rowGroups []int) []int {
	if rowGroups != nil {
		return rowGroups
	}
	all := make([]int, pr.NumRowGroups())
	for i := range all {
		all[i] = i
	}
	return all
}

func newByteArrayReader(pr *file.Reader, col int, f arrow.Field, rowGroups []int, batch int64, mem memory.Allocator) *byteArrayReader {
	id := f.Type.ID()
	d := pr.MetaData().Schema.Column(col)
	_, annotated := d.LogicalType().(*schema.StringLogicalType)
	r := &byteArrayReader{
		checkUTF8: (id == arrow.STRING || id == arrow.LARGE_STRING) && !annotated && d.ConvertedType() != schema.ConvertedTypes.UTF8,
		pr:        pr, col: col, groups: slices.Clone(allGroups(pr, rowGroups)), batch: max(1, batch), mem: mem,
		maxDef: d.MaxDefinitionLevel(),
		large:  id == arrow.LARGE_STRING || id == arrow.LARGE_BINARY,
		schema: arrow.NewSchema([]arrow.Field{f}, nil),
	}
	byteArrayReaders.Add(1)
	r.refs.Store(1)
	return r
}

func (r *byteArrayReader) Retain() { r.refs.Add(1) }

func (r *byteArrayReader) Release() {
	if r.refs.Add(-1) == 0 {
		r.clear()
		r.closePages()
	}
}

func (r *byteArrayReader) clear() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}

func (r *byteArrayReader) closePages() {
	if r.pages != nil {
		_ = r.pages.Close()
		r.pages = nil
	}
}

func (r *byteArrayReader) Schema() *arrow.Schema          { return r.schema }
func (r *byteArrayReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *byteArrayReader) Record() arrow.RecordBatch      { return r.cur }
func (r *byteArrayReader) Err() error                     { return r.err }
func (r *byteArrayReader) failErr(err error) bool {
	r.err = fmt.Errorf("column %q: %w", r.schema.Field(0).Name, err)
	r.closePages()
	return false
}

// Next decodes the next batch: batch rows, or what is left.
func (r *byteArrayReader) Next() bool {
	r.clear()
	if r.err != nil {
		return false
	}
	b := newByteArrayBuilder(r.mem, r.batch, r.large, r.maxDef > 0, int(float64(r.batch)*max(r.avgSize, 8)))
	defer b.release()
	for b.n < r.batch {
		if r.left == 0 {
			ok, err := r.nextPage()
			if err != nil {
				return r.failErr(err)
			}
			if !ok {
				break
			}
			continue
		}
		k := int(min(int64(r.left), r.batch-b.n))
		if err := r.decode(b, k); err != nil {
			return r.failErr(err)
		}
		r.left -= k
	}
	if b.n == 0 {
		return false
	}
	if b.n > 0 {
		r.avgSize = float64(b.size()) / float64(b.n)
	}
	if r.checkUTF8 {
		if i := b.invalidUTF8(); i >= 0 {
			return r.failErr(fmt.Errorf("value %d is not UTF-8, but the file's Arrow schema calls the column a string", i))
		}
	}
	arr, err := b.finish(r.schema.Field(0).Type)
	if err != nil {
		return r.failErr(err)
	}
	r.cur = array.NewRecordBatch(r.schema, []arrow.Array{arr}, int64(arr.Len()))
	arr.Release()
	return true
}

// nextPage makes the next data page current (reading dictionary pages and
// moving to the next row group on the way); false at the end.
func (r *byteArrayReader) nextPage() (bool, error) {
	for {
		if r.pages == nil {
			if r.next >= len(r.groups) {
				return false, nil
			}
			rg := r.groups[r.next]
			r.next++
			pages, err := r.pr.RowGroup(rg).GetColumnPageReader(r.col)
			if err != nil {
				return false, err
			}
			r.pages, r.haveDict = pages, false
		}
		if !r.pages.Next() {
			err := r.pages.Err()
			r.closePages()
			if err != nil {
				return false, err
			}
			continue
		}
		switch p := r.pages.Page().(type) {
		case *file.DictionaryPage:
			if err := r.readDict(p); err != nil {
				return false, err
			}
		case *file.DataPageV1:
			if p.NumValues() == 0 {
				continue
			}
			data := p.Data()
			if r.maxDef > 0 {
				if p.DefinitionLevelEncoding() != parquet.Encodings.RLE {
					return false, fmt.Errorf("definition levels in %s, not RLE", p.DefinitionLevelEncoding())
				}
				if len(data) < 4 {
					return false, errors.New("a data page shorter than its levels' length")
				}
				n := binary.LittleEndian.Uint32(data)
				if uint64(n) > uint64(len(data)-4) {
					return false, fmt.Errorf("definition levels of %d bytes in a page of %d", n, len(data))
				}
				r.defs = rleDecoder{data: data[4 : 4+n], width: 1}
				data = data[4+n:]
			}
			return true, r.startValues(parquet.Encoding(p.Encoding()), int(p.NumValues()), data)
		case *file.DataPageV2:
			if p.NumValues() == 0 {
				continue
			}
			data := p.Data()
			rl, dl := int64(p.RepetitionLevelByteLen()), int64(p.DefinitionLevelByteLen())
			if rl < 0 || dl < 0 || rl+dl > int64(len(data)) {
				return false, fmt.Errorf("levels of %d+%d bytes in a page of %d", rl, dl, len(data))
			}
			if r.maxDef > 0 {
				r.defs = rleDecoder{data: data[rl : rl+dl], width: 1}
			}
			return true, r.startValues(parquet.Encoding(p.Encoding()), int(p.NumValues()), data[rl+dl:])
		}
	}
}

// readDict keeps the values of a dictionary page.
func (r *byteArrayReader) readDict(p *file.DictionaryPage) error {
	if e := parquet.Encoding(p.Encoding()); e != parquet.Encodings.Plain && e != parquet.Encodings.PlainDict {
		return fmt.Errorf("a dictionary page in %s", e)
	}
	n := int(p.NumValues())
	data := p.Data()
	if n < 0 || n > len(data)/4 {
		return fmt.Errorf("a dictionary of %d values in %d bytes", n, len(data))
	}
	r.dict = slices.Grow(r.dict[:0], len(data)-4*n)
	r.dictEnd = slices.Grow(r.dictEnd[:0], n)
	for range n {
		if len(data) < 4 {
			return errors.New("a dictionary page shorter than its values")
		}
		l := binary.LittleEndian.Uint32(data)
		if uint64(l) > uint64(len(data)-4) {
			return errors.New("a dictionary page shorter than its values")
		}
		r.dict = append(r.dict, data[4:4+l]...)
		r.dictEnd = append(r.dictEnd, uint32(len(r.dict)))
		data = data[4+l:]
	}
	r.haveDict = true
	return nil
}

// startValues sets up the decoding of a data page's n values (levels).
func (r *byteArrayReader) startValues(enc parquet.Encoding, n int, data []byte) error {
	if n < 0 {
		return fmt.Errorf("a page of %d values", n)
	}
	r.left = n
	switch enc {
	case parquet.Encodings.Plain:
		r.isDict, r.plain = false, data
	case parquet.Encodings.RLEDict, parquet.Encodings.PlainDict:
		if !r.haveDict {
			return errors.New("a dictionary-encoded page without a dictionary page")
		}
		if len(data) < 1 {
			return errors.New("a dictionary-encoded page without its bit width")
		}
		w := int(data[0])
		if w > 32 {
			return fmt.Errorf("dictionary indices of %d bits", w)
		}
		r.isDict, r.idx = true, rleDecoder{data: data[1:], width: w}
	default:
		return fmt.Errorf("values in %s", enc)
	}
	return nil
}

// decode appends k values of the current page to b.
func (r *byteArrayReader) decode(b *byteArrayBuilder, k int) error {
	present := k
	var levels []uint32
	if r.maxDef > 0 {
		r.levels = slices.Grow(r.levels[:0], k)[:k]
		levels = r.levels
		if err := r.defs.read(levels); err != nil {
			return fmt.Errorf("definition levels: %w", err)
		}
		present = 0
		for _, l := range levels {
			if l > 1 {
				return fmt.Errorf("definition level %d over the column's 1", l)
			}
			present += int(l)
		}
		if present == k {
			levels = nil // no nulls: the builders' fast paths
		}
	}
	var vals [][]byte
	if r.isDict {
		r.scratch = slices.Grow(r.scratch[:0], present)[:present]
		if err := r.idx.read(r.scratch); err != nil {
			return fmt.Errorf("dictionary indices: %w", err)
		}
		ends := r.dictEnd
		for _, i := range r.scratch {
			if int(i) >= len(ends) {
				return fmt.Errorf("dictionary index %d of %d values", i, len(ends))
			}
		}
		return b.appendDict(levels, r.scratch, r.dict, ends)
	}
	vals = b.plainScratch(present)
	data := r.plain
	for i := range vals {
		if len(data) < 4 {
			return errors.New("a data page shorter than its values")
		}
		l := binary.LittleEndian.Uint32(data)
		if uint64(l) > uint64(len(data)-4) {
			return errors.New("a data page shorter than its values")
		}
		vals[i] = data[4 : 4+l]
		data = data[4+l:]
	}
	r.plain = data
	return b.appendPlain(levels, vals)
}

// byteArrayBuilder gathers a batch of one byte-array column.
type byteArrayBuilder struct {
	mem   memory.Allocator
	large bool
	n     int64 // values so far
	nulls int
	off32 []int32
	off64 []int64
	valid *memory.Buffer // nil: not nullable
	data  *memory.Buffer
	dlen  int
	vals  [][]byte
	bufs  []*memory.Buffer
}

func newByteArrayBuilder(mem memory.Allocator, rows int64, large, nullable bool, dataCap int) *byteArrayBuilder {
	b := &byteArrayBuilder{mem: mem, large: large}
	offs := memory.NewResizableBuffer(mem)
	if large {
		offs.Resize(int(rows+1) * 8)
		b.off64 = arrow.Int64Traits.CastFromBytes(offs.Bytes())[:1]
		b.off64[0] = 0
	} else {
		offs.Resize(int(rows+1) * 4)
		b.off32 = arrow.Int32Traits.CastFromBytes(offs.Bytes())[:1]
		b.off32[0] = 0
	}
	b.bufs = append(b.bufs, offs)
	if nullable {
		b.valid = memory.NewResizableBuffer(mem)
		b.valid.Resize(int(bitutilBytes(rows)))
		clear(b.valid.Bytes())
		b.bufs = append(b.bufs, b.valid)
	}
	b.data = memory.NewResizableBuffer(mem)
	b.data.Reserve(max(dataCap, 64))
	b.bufs = append(b.bufs, b.data)
	return b
}

func bitutilBytes(n int64) int64 { return (n + 7) / 8 }

func (b *byteArrayBuilder) release() {
	for _, x := range b.bufs {
		x.Release()
	}
	b.bufs = nil
}

func (b *byteArrayBuilder) size() int { return b.dlen }

func (b *byteArrayBuilder) plainScratch(n int) [][]byte {
	b.vals = slices.Grow(b.vals[:0], n)[:n]
	return b.vals
}

// reserve makes room for more data bytes.
func (b *byteArrayBuilder) reserve(more int) error {
	need := b.dlen + more
	if !b.large && need > math.MaxInt32 {
		return fmt.Errorf("a batch of over %d bytes of values, more than 32-bit offsets hold", need)
	}
	if need <= b.data.Cap() {
		return nil
	}
	b.data.Reserve(max(need, 2*b.data.Cap()))
	return nil
}

func (b *byteArrayBuilder) put(v []byte) {
	copy(b.data.Buf()[b.dlen:], v)
	b.dlen += len(v)
}

// end closes the value (or null) at the next position.
func (b *byteArrayBuilder) end(valid bool) {
	if b.valid != nil {
		if valid {
			bm := b.valid.Bytes()
			bm[b.n>>3] |= 1 << (b.n & 7)
		} else {
			b.nulls++
		}
	}
	b.n++
	if b.large {
		b.off64 = append(b.off64, int64(b.dlen))
	} else {
		b.off32 = append(b.off32, int32(b.dlen))
	}
}

func (b *byteArrayBuilder) appendDict(levels, idx []uint32, dict []byte, ends []uint32) error {
	total := 0
	for _, i := range idx {
		start := uint32(0)
		if i > 0 {
			start = ends[i-1]
		}
		total += int(ends[i] - start)
	}
	if err := b.reserve(total); err != nil {
		return err
	}
	buf := b.data.Buf()
	n := b.dlen
	if levels == nil {
		// No nulls (the common case), one loop: copy each value, end it.
		if b.valid != nil {
			bitutil.SetBitsTo(b.valid.Bytes(), b.n, int64(len(idx)), true)
		}
		for _, i := range idx {
			start := uint32(0)
			if i > 0 {
				start = ends[i-1]
			}
			n += copy(buf[n:], dict[start:ends[i]])
			if b.large {
				b.off64 = append(b.off64, int64(n))
			} else {
				b.off32 = append(b.off32, int32(n))
			}
		}
		b.dlen = n
		b.n += int64(len(idx))
		return nil
	}
	j := 0
	for _, l := range levels {
		if l == 1 {
			i := idx[j]
			j++
			start := uint32(0)
			if i > 0 {
				start = ends[i-1]
			}
			n += copy(buf[n:], dict[start:ends[i]])
		}
		b.dlen = n
		b.end(l == 1)
	}
	return nil
}

func (b *byteArrayBuilder) appendPlain(levels []uint32, vals [][]byte) error {
	total := 0
	for _, v := range vals {
		total += len(v)
	}
	if err := b.reserve(total); err != nil {
		return err
	}
	if levels == nil {
		if b.valid != nil {
			bitutil.SetBitsTo(b.valid.Bytes(), b.n, int64(len(vals)), true)
		}
		for _, v := range vals {
			b.put(v)
			b.end(true)
		}
		return nil
	}
	j := 0
	for _, l := range levels {
		if l == 1 {
			b.put(vals[j])
			j++
		}
		b.end(l == 1)
	}
	return nil
}

// invalidUTF8 is the position of the first value that is not UTF-8 (-1:
// none).
func (b *byteArrayBuilder) invalidUTF8() int {
	data := b.data.Buf()
	for i := range int(b.n) {
		var lo, hi int
		if b.large {
			lo, hi = int(b.off64[i]), int(b.off64[i+1])
		} else {
			lo, hi = int(b.off32[i]), int(b.off32[i+1])
		}
		if !utf8.Valid(data[lo:hi]) {
			return i
		}
	}
	return -1
}

// finish makes the batch's array of type dt.
func (b *byteArrayBuilder) finish(dt arrow.DataType) (arrow.Array, error) {
	b.data.ResizeNoShrink(b.dlen)
	offs := b.bufs[0]
	if b.large {
		offs.ResizeNoShrink(int(b.n+1) * 8)
	} else {
		offs.ResizeNoShrink(int(b.n+1) * 4)
	}
	var valid *memory.Buffer
	if b.valid != nil && b.nulls > 0 {
		b.valid.ResizeNoShrink(int(bitutilBytes(b.n)))
		valid = b.valid
	}
	d := array.NewData(dt, int(b.n), []*memory.Buffer{valid, offs, b.data}, nil, b.nulls, 0)
	defer d.Release()
	return array.MakeFromData(d), nil
}

// rleDecoder reads Parquet's RLE / bit-packed hybrid encoding of values
// of width bits (0 to 32).
type rleDecoder struct {
	data  []byte
	width int
	// The current run: an RLE run repeats val rle times; a bit-packed
	// run has packed values left in bp (from bit bpBit on).
	rle    int
	val    uint32
	bp     []byte
	bpLeft int
	bpBit  int
}

var errRLEShort = errors.New("the encoded values end early")

// read fills out.
func (d *rleDecoder) read(out []uint32) error {
	for len(out) > 0 {
		if d.rle > 0 {
			n := min(d.rle, len(out))
			v := d.val
			for i := range n {
				out[i] = v
			}
			d.rle -= n
			out = out[n:]
			continue
		}
		if d.bpLeft > 0 {
			n := min(d.bpLeft, len(out))
			d.unpack(out[:n])
			d.bpLeft -= n
			out = out[n:]
			continue
		}
		if err := d.header(); err != nil {
			return err
		}
	}
	return nil
}

// header starts the next run.
func (d *rleDecoder) header() error {
	h, n := binary.Uvarint(d.data)
	if n <= 0 {
		return errRLEShort
	}
	d.data = d.data[n:]
	if h&1 == 0 {
		count := h >> 1
		nb := (d.width + 7) / 8
		if count == 0 || count > math.MaxInt32 || len(d.data) < nb {
			return errRLEShort
		}
		var v uint32
		for i := range nb {
			v |= uint32(d.data[i]) << (8 * i)
		}
		if d.width < 32 && v>>d.width != 0 {
			return fmt.Errorf("a run's value %d is wider than %d bits", v, d.width)
		}
		d.data = d.data[nb:]
		d.rle, d.val = int(count), v
		return nil
	}
	groups := h >> 1
	if groups == 0 || groups > math.MaxInt32/8 {
		return errRLEShort
	}
	nb := groups * uint64(d.width)
	if nb > uint64(len(d.data)) {
		// The last run of a page may be cut short of its groups' bytes:
		// what is there is what may be read.
		nb = uint64(len(d.data))
	}
	d.bp, d.bpBit = d.data[:nb], 0
	d.bpLeft = int(groups * 8)
	if d.width > 0 {
		d.bpLeft = min(d.bpLeft, int(nb*8/uint64(d.width)))
	}
	if d.bpLeft == 0 && d.width > 0 {
		return errRLEShort
	}
	d.data = d.data[nb:]
	return nil
}

// unpack reads len(out) bit-packed values.
func (d *rleDecoder) unpack(out []uint32) {
	w := d.width
	if w == 0 {
		clear(out)
		return
	}
	mask := uint64(1)<<w - 1
	bit := d.bpBit
	bp := d.bp
	for i := range out {
		byteAt := bit >> 3
		var word uint64
		if byteAt+8 <= len(bp) {
			word = binary.LittleEndian.Uint64(bp[byteAt:])
		} else {
			for k := 0; byteAt+k < len(bp); k++ {
				word |= uint64(bp[byteAt+k]) << (8 * k)
			}
		}
		out[i] = uint32((word >> (bit & 7)) & mask)
		bit += w
	}
	d.bpBit = bit
}
