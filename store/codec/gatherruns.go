package codec

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/internal/par"
)

// GatherRuns returns the rows runs[0] of data, then those of runs[1], and
// so on, as one batch (data's schema): run i is rows [s_i, s_i+len(runs[i]))
// of it, where s_i is the total length of the runs before it. No row may
// be in two runs. The columns are gathered on up to workers goroutines.
// The result must be released.
//
// The buffers of the columns it gathers itself (and its scratch memory)
// come from mem, compute.GetAllocator(ctx) if nil, taken uncleared when
// mem can hand out memory uncleared (UnzeroedAllocator): every byte of
// them, padding included, is written. Nested and dictionary columns go
// through compute.Take, with ctx's allocator: arrow-go's kernels assume
// that an allocation's capacity is its length, which a pool's size
// classes are not (execBufBuilder indexes past the length).
//
// It is gatherBatch for the rows of several partitions at once, made
// another way: gathering each partition's rows out of a batch, partition
// after partition, read every column once per partition at random (the
// rows of a partition are spread over the batch), and the columns pushed
// each other out of the cache in between — a fifth of a 64-partition
// put's CPU. Here each column is read once, in the order of its rows,
// and each row written to its place in the output (a scatter into one
// stream per run).
func GatherRuns(ctx context.Context, data arrow.RecordBatch, runs [][]int32, workers int, mem memory.Allocator) (arrow.RecordBatch, error) {
	if mem == nil {
		mem = compute.GetAllocator(ctx)
	}
	plan, err := PlanRuns(data, runs, mem)
	if err != nil {
		return nil, err
	}
	defer plan.Release()
	total := plan.Rows()
	cols := make([]arrow.Array, data.NumCols())
	var direct []int
	var order *array.Int32 // the output's rows of data, for compute.Take
	for i, c := range data.Columns() {
		if Scatterable(c) {
			direct = append(direct, i)
			continue
		}
		if order == nil {
			buf := memory.NewResizableBuffer(compute.GetAllocator(ctx))
			buf.Resize(total * arrow.Int32SizeBytes)
			o := arrow.Int32Traits.CastFromBytes(buf.Bytes())
			for j, row := range plan.src {
				o[plan.pos[j]] = row
			}
			d := array.NewData(arrow.PrimitiveTypes.Int32, total, []*memory.Buffer{nil, buf}, nil, 0, 0)
			buf.Release()
			order = array.NewInt32Data(d)
			d.Release()
			defer order.Release()
		}
		var err error
		if cols[i], err = compute.TakeArray(ctx, c, order); err != nil {
			releaseAll(cols)
			return nil, fmt.Errorf("gather rows: %w", err)
		}
	}
	err = par.ForEach(len(direct), workers, func(j int) error {
		i := direct[j]
		cols[i] = plan.Column(data.Column(i))
		return nil
	})
	if err != nil {
		releaseAll(cols)
		return nil, fmt.Errorf("gather rows: %w", err)
	}
	sc := data.Schema()
	for i := range cols {
		cols[i] = asType(cols[i], sc.Field(i).Type)
	}
	out := array.NewRecordBatch(sc, cols, int64(total))
	releaseAll(cols)
	return out, nil
}

// RunPlan is where GatherRuns puts each row of a batch: made once, it
// gathers any number of the batch's columns (Column), one at a time if
// the caller likes (a spill writes each as it is gathered).
type RunPlan struct {
	mem      memory.Allocator
	src, pos []int32 // the rows taken, ascending, and their places in the output
	total    int
	free     []func()
}

// PlanRuns plans the gathering of runs out of data (GatherRuns' rules;
// scratch memory from mem). The plan must be released.
func PlanRuns(data arrow.RecordBatch, runs [][]int32, mem memory.Allocator) (*RunPlan, error) {
	rows := int(data.NumRows())
	p := &RunPlan{mem: mem}
	for _, r := range runs {
		p.total += len(r)
	}
	// dst[row] is the row's place in the output, or -1; then src and pos
	// list the rows taken, ascending, and their places. (Scratch memory
	// from mem too: a pool hands the last chunk's out again.)
	scratch := pageAllocator(mem)
	ints := func(n int) []int32 {
		b := scratch.Allocate(n * arrow.Int32SizeBytes)
		p.free = append(p.free, func() { scratch.Free(b) })
		return arrow.Int32Traits.CastFromBytes(b)
	}
	dst := ints(rows)
	for i := range dst {
		dst[i] = -1
	}
	k := int32(0)
	for _, run := range runs {
		for _, row := range run {
			if row < 0 || int(row) >= rows || dst[row] >= 0 {
				p.Release()
				return nil, fmt.Errorf("gather rows: row %d of %d out of range or taken twice", row, rows)
			}
			dst[row] = k
			k++
		}
	}
	p.src, p.pos = ints(p.total), ints(p.total)
	j := 0
	for row, k := range dst {
		if k >= 0 {
			p.src[j], p.pos[j] = int32(row), k
			j++
		}
	}
	return p, nil
}

// Rows is the rows of the plan's output.
func (p *RunPlan) Rows() int { return p.total }

// Column returns the planned rows of arr, a column of the plan's batch
// that Scatterable accepts (of its type: a caller that needs the
// schema's field type converts it). Columns may be gathered at once on
// several goroutines. The result must be released.
func (p *RunPlan) Column(arr arrow.Array) arrow.Array {
	return scatter(p.mem, arr, p.src, p.pos)
}

// Release frees the plan's scratch memory.
func (p *RunPlan) Release() {
	for _, f := range p.free {
		f()
	}
	p.free = nil
}

// Scatterable reports whether RunPlan.Column (scatter) moves the rows of
// arr itself: a column of a fixed-width type of whole bytes, bool, or
// (large) string or binary, neither nested nor a dictionary nor an
// extension.
func Scatterable(arr arrow.Array) bool {
	d := arr.Data()
	if len(d.Children()) > 0 || present(d.Dictionary()) {
		return false
	}
	switch dt := arr.DataType().(type) {
	case *arrow.BooleanType, *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		return true
	case arrow.FixedWidthDataType:
		_, ext := arr.DataType().(arrow.ExtensionType)
		return !ext && len(d.Buffers()) == 2 && dt.BitWidth()%8 == 0 && dt.BitWidth() > 0
	}
	return false
}

// NewBuffer returns a buffer of size bytes from mem for the caller to
// write whole: taken uncleared when mem allows, its padding (up to the
// allocation's multiple of 64 bytes) cleared.
func NewBuffer(mem memory.Allocator, size int) *memory.Buffer {
	b := memory.NewResizableBuffer(pageAllocator(mem))
	b.Resize(size)
	clear(b.Buf()[size:])
	return b
}

// scatter returns an array of len(src) rows of arr's type (scatterable):
// row src[j] of arr is its row pos[j]. src is ascending; pos is a
// permutation of [0, len(pos)).
func scatter(mem memory.Allocator, arr arrow.Array, src, pos []int32) arrow.Array {
	d := arr.Data()
	n := len(src)
	off := d.Offset()
	bufs := d.Buffers()
	var validity *memory.Buffer
	nulls := 0
	if arr.NullN() > 0 {
		validity = NewBuffer(mem, int(bitutil.BytesForBits(int64(n))))
		nulls = scatterBits(validity.Bytes(), bufs[0].Bytes(), off, src, pos)
		nulls = n - nulls
	}
	out := []*memory.Buffer{validity}
	switch dt := arr.DataType().(type) {
	case *arrow.BooleanType:
		vals := NewBuffer(mem, int(bitutil.BytesForBits(int64(n))))
		scatterBits(vals.Bytes(), bufs[1].Bytes(), off, src, pos)
		out = append(out, vals)
	case *arrow.StringType, *arrow.BinaryType:
		offs := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())[off : off+arr.Len()+1]
		var values []byte
		if bufs[2] != nil {
			values = bufs[2].Bytes()
		}
		ob := NewBuffer(mem, (n+1)*arrow.Int32SizeBytes)
		o := arrow.Int32Traits.CastFromBytes(ob.Bytes())
		scatterOffsets(o, offs, src, pos)
		vb := NewBuffer(mem, int(o[n]))
		scatterValues(vb.Bytes(), o, offs, values, src, pos)
		out = append(out, ob, vb)
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		offs := arrow.Int64Traits.CastFromBytes(bufs[1].Bytes())[off : off+arr.Len()+1]
		var values []byte
		if bufs[2] != nil {
			values = bufs[2].Bytes()
		}
		ob := NewBuffer(mem, (n+1)*arrow.Int64SizeBytes)
		o := arrow.Int64Traits.CastFromBytes(ob.Bytes())
		scatterOffsets(o, offs, src, pos)
		vb := NewBuffer(mem, int(o[n]))
		scatterValues(vb.Bytes(), o, offs, values, src, pos)
		out = append(out, ob, vb)
	case arrow.FixedWidthDataType:
		w := dt.BitWidth() / 8
		vals := NewBuffer(mem, n*w)
		to := vals.Bytes()
		var from []byte
		if bufs[1] != nil {
			from = bufs[1].Bytes()[off*w : (off+arr.Len())*w]
		}
		switch w {
		case 8:
			scatterFixed(arrow.Uint64Traits.CastFromBytes(to), arrow.Uint64Traits.CastFromBytes(from), src, pos)
		case 4:
			scatterFixed(arrow.Uint32Traits.CastFromBytes(to), arrow.Uint32Traits.CastFromBytes(from), src, pos)
		case 2:
			scatterFixed(arrow.Uint16Traits.CastFromBytes(to), arrow.Uint16Traits.CastFromBytes(from), src, pos)
		case 1:
			scatterFixed(to, from, src, pos)
		default:
			for j, r := range src {
				k := int(pos[j])
				copy(to[k*w:(k+1)*w], from[int(r)*w:int(r+1)*w])
			}
		}
		out = append(out, vals)
	default:
		panic(fmt.Sprintf("codec: scatter of %s", arr.DataType()))
	}
	nd := array.NewData(arr.DataType(), n, out, nil, nulls, 0)
	for _, b := range out {
		if b != nil {
			b.Release()
		}
	}
	defer nd.Release()
	return array.MakeFromData(nd)
}

func scatterFixed[T uint8 | uint16 | uint32 | uint64](to, from []T, src, pos []int32) {
	pos = pos[:len(src)]
	for j, r := range src {
		to[pos[j]] = from[r]
	}
}

// scatterBits writes bit off+src[j] of from to bit pos[j] of to, every
// byte of to written (it need not be cleared), and returns the bits set.
func scatterBits(to, from []byte, off int, src, pos []int32) int {
	clear(to)
	set := 0
	pos = pos[:len(src)]
	for j, r := range src {
		if bitutil.BitIsSet(from, off+int(r)) {
			k := pos[j]
			to[k>>3] |= 1 << (k & 7)
			set++
		}
	}
	return set
}

// scatterOffsets writes the offsets o of the output (len(src)+1 of them,
// from 0) whose value pos[j] is value src[j] of offs.
func scatterOffsets[T int32 | int64](o, offs []T, src, pos []int32) {
	o[0] = 0
	pos = pos[:len(src)]
	for j, r := range src {
		o[pos[j]+1] = offs[r+1] - offs[r]
	}
	for k := 1; k < len(o); k++ {
		o[k] += o[k-1]
	}
}

// scatterValues copies value src[j] (offs, of values) to its place pos[j]
// in v (offsets o).
func scatterValues[T int32 | int64](v []byte, o, offs []T, values []byte, src, pos []int32) {
	pos = pos[:len(src)]
	for j, r := range src {
		k := pos[j]
		copy(v[o[k]:o[k+1]], values[offs[r]:offs[r+1]])
	}
}
