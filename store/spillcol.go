package store

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/quiverdb/quiver/internal/par"
	"github.com/quiverdb/quiver/store/codec"
)

// spillSeg is a batch spilled by columns (addColumns): each column of it
// gathered whole, its partitions' rows in runs, one after the other, and
// written to the file as it is gathered. A block of a segment is one run
// (a partition's rows of the batch), and its bytes are a slice of each
// column's buffers; replaying a partition reads its blocks' slices
// straight into the buffers of the batch it hands on (readColumns).
//
// A block per partition written as an Arrow IPC stream of its own (write)
// cost a 64-partition put, for each byte: the gather into its own
// buffers, a copy into the file's buffer, a copy out of the file into
// the message read back, and a copy joining the blocks; the columns were
// gathered 4 MiB of rows at a time (every column of the batch read again
// for each chunk), and each block carried its schema. Spilled by
// columns, a batch is gathered in one pass over each column and written
// from the gathered buffers, and read back into place: about a tenth of
// the partitioned put's CPU (docs/benchmarks.md, twenty-sixth session).
// Batches with a column that does not scatter (a dictionary, nested or
// extension column) are spilled as IPC blocks, as before; a partition may
// hold blocks of both kinds.
type spillSeg struct {
	sc     *arrow.Schema
	starts []int64 // the segment's row of run r's first; len(runs)+1
	bits   []int64 // the bit of run r's first row in the segment's bitmaps (each run starts a byte); len(runs)+1
	cols   []segCol
}

// segColKind is how a column's values are laid out.
type segColKind uint8

const (
	segFixed segColKind = iota // width bytes a value
	segBool                    // bits, as the validity bitmap
	segVar                     // offsets of width bytes (the last, each run's end, in ends) and values
)

// segCol is where a column of a segment is in the file.
type segCol struct {
	kind  segColKind
	width int64
	valid int64   // the validity bitmap's first byte, or -1 (no nulls)
	data  int64   // the values' (segFixed, segBool) or the offsets' (segVar) first byte
	vals  int64   // segVar: the values' first byte
	ends  []int64 // segVar: the offset of run r's first value; len(runs)+1
}

// spillColumnBytes bounds a column of a batch spilled by columns: its
// gathered copy is held until written, two at a time (one per core), and
// a batch with a larger column (up to the 128 MiB a message may carry)
// is spilled as IPC blocks, gathered 4 MiB of rows at a time
// (gatherChunkBytes).
var spillColumnBytes int64 = 16 << 20 // (a variable for tests)

// spillsByColumns reports whether rec's columns may be spilled by columns.
func spillsByColumns(rec arrow.RecordBatch) bool {
	for _, c := range rec.Columns() {
		if !codec.Scatterable(c) || util.TotalArraySize(c) > spillColumnBytes {
			return false
		}
	}
	return true
}

// addColumns writes parts of data (a conformed batch whose columns all
// scatter) into the spill as a segment: a block per part. The columns are gathered on workers goroutines, each
// written as soon as it is (at most workers of them gathered at once).
func (sp *spill) addColumns(ctx context.Context, data arrow.RecordBatch, parts []codec.Part, workers int) error {
	runs := make([][]int32, len(parts))
	seg := &spillSeg{sc: data.Schema(), starts: make([]int64, len(runs)+1), bits: make([]int64, len(runs)+1), cols: make([]segCol, data.NumCols())}
	for r, part := range parts {
		runs[r] = part.Rows
		n := int64(len(part.Rows))
		seg.starts[r+1] = seg.starts[r] + n
		seg.bits[r+1] = seg.bits[r] + (n+7)&^7
	}
	plan, err := codec.PlanRuns(data, runs, sp.mem)
	if err != nil {
		return err
	}
	defer plan.Release()
	if err := sp.bw.Flush(); err != nil { // (the IPC blocks before it)
		return spillFail(err)
	}
	start := sp.end
	var mu sync.Mutex // (the file's end)
	err = par.ForEach(int(data.NumCols()), workers, func(i int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		col := plan.Column(data.Column(i))
		defer col.Release()
		c, bufs := seg.layout(col)
		mu.Lock()
		defer mu.Unlock()
		at := sp.end
		for _, b := range bufs {
			if _, err := sp.f.WriteAt(b, sp.end); err != nil {
				return spillFail(err)
			}
			sp.end += int64(len(b))
		}
		if c.valid >= 0 {
			c.valid += at
		}
		c.data += at
		if c.vals >= 0 {
			c.vals += at
		}
		seg.cols[i] = c
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := sp.f.Seek(sp.end, io.SeekStart); err != nil { // (where the IPC blocks after it go)
		return spillFail(err)
	}
	for r, part := range parts {
		b := spillBlock{off: start, rows: int64(len(part.Rows)), seg: seg, run: r}
		b.ranges(func(_, n int64) { b.n += n })
		sp.count(b, 1)
		sp.list(part, b)
	}
	return nil
}

// layout returns where col (a gathered column of the segment, offset 0)
// is in the buffers it is written as, and those buffers: the validity
// bitmap if it has nulls, then its values (offsets, then values, for
// strings and binaries). Its offsets are from the first buffer's start.
func (s *spillSeg) layout(col arrow.Array) (segCol, [][]byte) {
	d := col.Data()
	n := int64(d.Len())
	bufs := d.Buffers()
	c := segCol{valid: -1, vals: -1}
	var out [][]byte
	at := int64(0)
	add := func(b []byte) int64 {
		out = append(out, b)
		at += int64(len(b))
		return at - int64(len(b))
	}
	if col.NullN() > 0 {
		c.valid = add(s.realign(bufs[0].Bytes()))
	}
	bytesOf := func(b *memory.Buffer) []byte {
		if b == nil {
			return nil
		}
		return b.Bytes()
	}
	switch dt := col.DataType().(type) {
	case *arrow.BooleanType:
		c.kind = segBool
		c.data = add(s.realign(bufs[1].Bytes()))
	case *arrow.StringType, *arrow.BinaryType:
		offs := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())[:n+1]
		c.kind, c.width = segVar, 4
		c.ends = make([]int64, len(s.starts))
		for r, row := range s.starts {
			c.ends[r] = int64(offs[row])
		}
		c.data = add(bufs[1].Bytes()[:n*4])
		c.vals = add(bytesOf(bufs[2])[:offs[n]])
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		offs := arrow.Int64Traits.CastFromBytes(bufs[1].Bytes())[:n+1]
		c.kind, c.width = segVar, 8
		c.ends = make([]int64, len(s.starts))
		for r, row := range s.starts {
			c.ends[r] = offs[row]
		}
		c.data = add(bufs[1].Bytes()[:n*8])
		c.vals = add(bytesOf(bufs[2])[:offs[n]])
	case arrow.FixedWidthDataType:
		c.kind, c.width = segFixed, int64(dt.BitWidth()/8)
		c.data = add(bytesOf(bufs[1])[:n*c.width])
	default:
		panic(fmt.Sprintf("store: spill by columns of %s", col.DataType()))
	}
	return c, out
}

// realign returns bitmap (of the segment's rows, from bit 0) with each
// run's bits from a byte of their own (s.bits).
func (s *spillSeg) realign(bitmap []byte) []byte {
	runs := len(s.starts) - 1
	out := make([]byte, s.bits[runs]/8)
	for r := 0; r < runs; r++ {
		bitutil.CopyBitmap(bitmap, int(s.starts[r]), int(s.starts[r+1]-s.starts[r]), out, int(s.bits[r]))
	}
	return out
}

// ranges calls fn with each span of the file that holds b's bytes:
// the block itself, or its slices of a segment's columns (none shared
// with another block, so that each is given back once).
func (b spillBlock) ranges(fn func(off, n int64)) {
	s := b.seg
	if s == nil {
		fn(b.off, b.n)
		return
	}
	first, rows := s.starts[b.run], b.rows
	bit, bitBytes := s.bits[b.run]/8, (rows+7)/8
	for i := range s.cols {
		c := &s.cols[i]
		if c.valid >= 0 {
			fn(c.valid+bit, bitBytes)
		}
		switch c.kind {
		case segBool:
			fn(c.data+bit, bitBytes)
		case segVar:
			fn(c.data+first*c.width, rows*c.width)
			fn(c.vals+c.ends[b.run], c.ends[b.run+1]-c.ends[b.run])
		default:
			fn(c.data+first*c.width, rows*c.width)
		}
	}
}

// readColumns returns the rows of bs (blocks of segments of one schema),
// one after the other, as one batch, each column's bytes read from the
// file into its place.
func (sp *spill) readColumns(bs []spillBlock) (arrow.RecordBatch, error) {
	sc := bs[0].seg.sc
	rows := int64(0)
	for _, b := range bs {
		rows += b.rows
	}
	cols := make([]arrow.Array, sc.NumFields())
	for i, f := range sc.Fields() {
		col, err := sp.readColumn(bs, i, f.Type, rows)
		if err != nil {
			releaseAll(cols[:i])
			return nil, err
		}
		cols[i] = col
	}
	rec := array.NewRecordBatch(sc, cols, rows)
	releaseAll(cols)
	return rec, nil
}

// readColumn returns column i of bs (rows rows in all), of type dt.
func (sp *spill) readColumn(bs []spillBlock, i int, dt arrow.DataType, rows int64) (arrow.Array, error) {
	var bufs []*memory.Buffer
	fail := func(err error) (arrow.Array, error) { // (err: spillReadFail's)
		for _, buf := range bufs {
			if buf != nil {
				buf.Release()
			}
		}
		return nil, err
	}
	readAt := func(p []byte, off int64) error {
		_, err := sp.f.ReadAt(p, off)
		return err
	}
	// bitmap reads the blocks' bitmaps (at, of each block's column) into
	// one; a block with none (at returns -1) is all set.
	var scratch []byte
	bitmap := func(at func(c *segCol) int64) (*memory.Buffer, error) {
		buf := codec.NewBuffer(sp.mem, int(bitutil.BytesForBits(rows)))
		bufs = append(bufs, buf)
		out := buf.Bytes()
		clear(out)
		k := int64(0)
		for _, b := range bs {
			c := &b.seg.cols[i]
			if off := at(c); off < 0 {
				bitutil.SetBitsTo(out, k, b.rows, true)
			} else {
				n := (b.rows + 7) / 8
				if int64(cap(scratch)) < n {
					scratch = make([]byte, n)
				}
				if err := readAt(scratch[:n], off+b.seg.bits[b.run]/8); err != nil {
					return nil, spillReadFail(b, err)
				}
				bitutil.CopyBitmap(scratch[:n], 0, int(b.rows), out, int(k))
			}
			k += b.rows
		}
		return buf, nil
	}
	c0 := &bs[0].seg.cols[i]
	nulls := 0
	hasNulls := false
	for _, b := range bs {
		if b.seg.cols[i].valid >= 0 {
			hasNulls = true
		}
	}
	if hasNulls {
		v, err := bitmap(func(c *segCol) int64 { return c.valid })
		if err != nil {
			return fail(err)
		}
		nulls = int(rows) - bitutil.CountSetBits(v.Bytes(), 0, int(rows))
	} else {
		bufs = append(bufs, nil)
	}
	switch c0.kind {
	case segBool:
		if _, err := bitmap(func(c *segCol) int64 { return c.data }); err != nil {
			return fail(err)
		}
	case segFixed:
		w := c0.width
		buf := codec.NewBuffer(sp.mem, int(rows*w))
		bufs = append(bufs, buf)
		out := buf.Bytes()
		k := int64(0)
		for _, b := range bs {
			c := &b.seg.cols[i]
			if err := readAt(out[k*w:(k+b.rows)*w], c.data+b.seg.starts[b.run]*w); err != nil {
				return fail(spillReadFail(b, err))
			}
			k += b.rows
		}
	case segVar:
		w := c0.width
		size := int64(0)
		for _, b := range bs {
			c := &b.seg.cols[i]
			size += c.ends[b.run+1] - c.ends[b.run]
		}
		ob := codec.NewBuffer(sp.mem, int((rows+1)*w))
		vb := codec.NewBuffer(sp.mem, int(size))
		bufs = append(bufs, ob, vb)
		offs, vals := ob.Bytes(), vb.Bytes()
		k, base := int64(0), int64(0)
		for _, b := range bs {
			c := &b.seg.cols[i]
			first, end := c.ends[b.run], c.ends[b.run+1]
			if err := readAt(offs[k*w:(k+b.rows)*w], c.data+b.seg.starts[b.run]*w); err != nil {
				return fail(spillReadFail(b, err))
			}
			var err error
			if w == 4 {
				err = rebase(arrow.Int32Traits.CastFromBytes(offs)[k:k+b.rows], first, end, base)
			} else {
				err = rebase(arrow.Int64Traits.CastFromBytes(offs)[k:k+b.rows], first, end, base)
			}
			if err != nil {
				return fail(spillReadFail(b, err))
			}
			if err := readAt(vals[base:base+end-first], c.vals+first); err != nil {
				return fail(spillReadFail(b, err))
			}
			k += b.rows
			base += end - first
		}
		if w == 4 {
			arrow.Int32Traits.CastFromBytes(offs)[rows] = int32(base)
		} else {
			arrow.Int64Traits.CastFromBytes(offs)[rows] = base
		}
	}
	d := array.NewData(dt, int(rows), bufs, nil, nulls, 0)
	for _, buf := range bufs {
		if buf != nil {
			buf.Release()
		}
	}
	defer d.Release()
	return array.MakeFromData(d), nil
}

// rebase turns offsets o, read back from a run whose values are [first,
// end) of its column, into offsets from base; they must start at first,
// rise, and stay within end, or the spill's bytes are not what it wrote.
func rebase[T int32 | int64](o []T, first, end, base int64) error {
	if len(o) > 0 && int64(o[0]) != first {
		return fmt.Errorf("first offset %d, want %d", o[0], first)
	}
	prev := first
	for j, v := range o {
		if int64(v) < prev || int64(v) > end {
			return fmt.Errorf("offset %d out of order (after %d, values to %d)", v, prev, end)
		}
		prev = int64(v)
		o[j] = T(int64(v) - first + base)
	}
	return nil
}
