package store

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/internal/poison"
	"github.com/quiverdb/quiver/store/codec"
)

// gatherSource is a batch of rows rows of every column type a put writes:
// fixed widths, booleans, strings, large strings, binaries, fixed-size
// binaries, decimals, timestamps, a dictionary, a list and a struct, most
// of them with nulls. Row i's values are a function of seed and i.
func gatherSource(t *testing.T, mem memory.Allocator, rows int, seed uint64) arrow.RecordBatch {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tok", Type: arrow.BinaryTypes.String},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 5}, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 20, Scale: 2}, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "dict", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "list", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, arrow.Field{Name: "z", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	}, nil)
	rng := rand.New(rand.NewPCG(seed, 3))
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	for i := range rows {
		v := rng.Int64N(1 << 40)
		null := func() bool { return rng.IntN(6) == 0 }
		for c, f := range sc.Fields() {
			fb := b.Field(c)
			if f.Nullable && null() {
				fb.AppendNull()
				continue
			}
			switch f.Name {
			case "i64":
				fb.(*array.Int64Builder).Append(int64(i)<<20 | v&0xfffff)
			case "i32":
				fb.(*array.Int32Builder).Append(int32(v))
			case "i8":
				fb.(*array.Int8Builder).Append(int8(v))
			case "f64":
				fb.(*array.Float64Builder).Append(float64(v) / 3)
			case "b":
				fb.(*array.BooleanBuilder).Append(v%3 == 0)
			case "s":
				fb.(*array.StringBuilder).Append(fmt.Sprintf("s%d", v%97))
			case "tok":
				fb.(*array.StringBuilder).Append(fmt.Sprintf("%x", v*v))
			case "ls":
				fb.(*array.LargeStringBuilder).Append(fmt.Sprintf("long-%d", v%1000))
			case "bin":
				fb.(*array.BinaryBuilder).Append([]byte{byte(v), byte(v >> 8), byte(v >> 16)}[:v%4])
			case "fsb":
				fb.(*array.FixedSizeBinaryBuilder).Append([]byte{byte(v), 1, 2, 3, byte(i)})
			case "dec":
				fb.(*array.Decimal128Builder).Append(decimal128.FromI64(v))
			case "ts":
				fb.(*array.TimestampBuilder).Append(arrow.Timestamp(v))
			case "dict":
				if err := fb.(*array.BinaryDictionaryBuilder).AppendString(fmt.Sprintf("d%d", v%11)); err != nil {
					t.Fatal(err)
				}
			case "list":
				lb := fb.(*array.ListBuilder)
				lb.Append(true)
				for j := range v % 3 {
					lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("e%d", j+v%5))
				}
			case "st":
				sb := fb.(*array.StructBuilder)
				sb.Append(true)
				sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(v % 1000))
				if v%4 == 0 {
					sb.FieldBuilder(1).AppendNull()
				} else {
					sb.FieldBuilder(1).(*array.StringBuilder).Append(fmt.Sprintf("z%d", v%7))
				}
			}
		}
	}
	return b.NewRecordBatch()
}

// TestWritePartsMatchesGather: the files writeParts writes, gathering a
// chunk of partitions at a time (codec.GatherRuns), are byte for byte
// those written from each partition's rows gathered on its own
// (codec.TakeRows), for every column type, with nulls, empty partitions,
// partitions whose rows are one run, and chunks of one partition to all
// of them.
func TestWritePartsMatchesGather(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const nparts = 9
	var batches []arrow.RecordBatch
	var rowsOf [][][]int32 // batch → part → rows
	for bi, rows := range []int{3000, 1, 0, 2500} {
		rec := gatherSource(t, mem, rows, uint64(bi))
		batches = append(batches, rec)
		rng := rand.New(rand.NewPCG(uint64(bi), 7))
		parts := make([][]int32, nparts)
		for row := range rows {
			p := rng.IntN(nparts - 2) // part nparts-2 gets no rows
			if row >= rows-200 {
				p = nparts - 1 // the last 200 rows: one run
			}
			parts[p] = append(parts[p], int32(row))
		}
		rowsOf = append(rowsOf, parts)
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	sc := batches[0].Schema()
	write := func(t *testing.T, each func(fws []*codec.FileWriter, rec arrow.RecordBatch, rows [][]int32)) [][]byte {
		outs := make([]*bytes.Buffer, nparts)
		fws := make([]*codec.FileWriter, nparts)
		for p := range fws {
			outs[p] = &bytes.Buffer{}
			fw, err := codec.NewFileWriter(outs[p], sc, codec.WriterOptions{Partitioned: true, Allocator: mem})
			if err != nil {
				t.Fatal(err)
			}
			fws[p] = fw
		}
		for bi, rec := range batches {
			each(fws, rec, rowsOf[bi])
		}
		files := make([][]byte, nparts)
		for p, fw := range fws {
			if err := fw.Close(); err != nil {
				t.Fatal(err)
			}
			files[p] = outs[p].Bytes()
		}
		return files
	}
	ctx := compute.WithAllocator(context.Background(), mem)
	want := write(t, func(fws []*codec.FileWriter, rec arrow.RecordBatch, rows [][]int32) {
		for p, r := range rows {
			part, _, err := codec.TakeRows(ctx, rec, r)
			if err != nil {
				t.Fatal(err)
			}
			if err := fws[p].Write(part); err != nil {
				t.Fatal(err)
			}
			part.Release()
		}
	})
	for _, chunk := range []int64{1, 64 << 10, 200 << 10, 1 << 30} {
		for _, pooled := range []bool{false, true} {
			t.Run(fmt.Sprintf("chunks of %d bytes, pooled %v", chunk, pooled), func(t *testing.T) {
				defer func(old int64) { gatherChunkBytes = old }(gatherChunkBytes)
				gatherChunkBytes = chunk
				var pool *poolAllocator
				if pooled {
					pool = &poolAllocator{maxHeld: 16 << 20}
				}
				got := write(t, func(fws []*codec.FileWriter, rec arrow.RecordBatch, rows [][]int32) {
					var parts []partWrite
					for p, r := range rows {
						parts = append(parts, partWrite{k: &sink{fw: fws[p]}, data: rec, rows: r})
					}
					var mem memory.Allocator
					if pool != nil {
						mem = pool
					}
					if err := writeParts(ctx, parts, 1<<30, mem); err != nil {
						t.Fatal(err)
					}
				})
				for p := range want {
					if !bytes.Equal(got[p], want[p]) {
						t.Errorf("partition %d: %d bytes, want %d (or other bytes)", p, len(got[p]), len(want[p]))
					}
				}
			})
		}
	}
}

// TestWritePartsPooledBuffers is the audit for a pool of the put's
// gathered rows (writeParts): the buffers a partition's rows are gathered
// into go back to the pool as soon as its Write returns, poisoned (internal/poison: on
// in tests), and the next chunk's gather takes them uncleared and
// overwrites them. If an encoder kept a slice of its input past Write
// without an Arrow reference — arrow-go's dictionary memo tables, column
// statistics (min/max of strings, fixed-size binaries, decimals), our
// dictionary unifier, page buffers — the row groups and footers written
// after the reuse would hold poison or other partitions' bytes. Each
// partition is written in many small batches, a row group ended every
// few, so that state kept across writes (a row group's dictionary and
// statistics, the file's metadata) sees many reuses. Freeing a batch
// before its write, which must be caught, is.
func TestWritePartsPooledBuffers(t *testing.T) {
	if !poison.On {
		t.Skip("freed memory is not poisoned")
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := compute.WithAllocator(context.Background(), mem)
	const batchRows, nbatches = 5000, 12
	src := gatherSource(t, mem, batchRows*nbatches, 42)
	defer src.Release()
	sc := src.Schema()
	const nparts = 4
	rng := rand.New(rand.NewPCG(5, 5))
	// Slices of src, their rows dealt to the parts at random (a part's
	// share of a column large enough for the pool, 4 KiB and up).
	type batch struct {
		rec  arrow.RecordBatch
		rows [][]int32
	}
	var batches []batch
	for b := range nbatches {
		rec := src.NewSlice(int64(b*batchRows), int64(b*batchRows+batchRows))
		rows := make([][]int32, nparts)
		for r := range batchRows {
			p := rng.IntN(nparts)
			rows[p] = append(rows[p], int32(r))
		}
		batches = append(batches, batch{rec, rows})
	}
	defer func() {
		for _, b := range batches {
			b.rec.Release()
		}
	}()
	write := func(t *testing.T, wmem memory.Allocator, writeBatch func(fws []*codec.FileWriter, b batch)) [][]byte {
		outs := make([]*bytes.Buffer, nparts)
		fws := make([]*codec.FileWriter, nparts)
		for p := range fws {
			outs[p] = &bytes.Buffer{}
			fw, err := codec.NewFileWriter(outs[p], sc, codec.WriterOptions{Partitioned: true, Allocator: wmem})
			if err != nil {
				t.Fatal(err)
			}
			fws[p] = fw
		}
		defer func() {
			if v := recover(); v != nil {
				for _, fw := range fws {
					fw.Abort()
				}
				panic(v)
			}
		}()
		for i, b := range batches {
			writeBatch(fws, b)
			if i%3 == 2 {
				for _, fw := range fws {
					if err := fw.EndRowGroup(); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		files := make([][]byte, nparts)
		for p, fw := range fws {
			if err := fw.Close(); err != nil {
				t.Fatal(err)
			}
			files[p] = outs[p].Bytes()
		}
		return files
	}
	want := write(t, mem, func(fws []*codec.FileWriter, b batch) {
		for p, r := range b.rows {
			part, _, err := codec.TakeRows(ctx, b.rec, r)
			if err != nil {
				t.Fatal(err)
			}
			if err := fws[p].Write(part); err != nil {
				t.Fatal(err)
			}
			part.Release()
		}
	})
	defer func(old int64) { gatherChunkBytes = old }(gatherChunkBytes)
	gatherChunkBytes = 1 // a chunk per partition: the most reuse
	pool := &poolAllocator{maxHeld: 16 << 20}
	got := write(t, mem, func(fws []*codec.FileWriter, b batch) {
		parts := make([]partWrite, nparts)
		for p, r := range b.rows {
			parts[p] = partWrite{k: &sink{fw: fws[p]}, data: b.rec, rows: r}
		}
		if err := writeParts(ctx, parts, 1<<30, pool); err != nil {
			t.Fatal(err)
		}
	})
	for p := range want {
		if !bytes.Equal(got[p], want[p]) {
			t.Errorf("partition %d: the files differ (%d bytes, want %d)", p, len(got[p]), len(want[p]))
		}
	}
	if pool.held == 0 {
		t.Error("nothing went back to the pool")
	}
	// The test's own power: a batch freed before its write is written
	// from poisoned (or reused) memory: the write fails or panics, or the
	// files differ.
	detected := func() (caught bool) {
		defer func() {
			if v := recover(); v != nil {
				caught = true
			}
		}()
		// (Writers a panic leaves unreleased: not the checked allocator.)
		early := write(t, memory.NewGoAllocator(), func(fws []*codec.FileWriter, b batch) {
			for p, r := range b.rows {
				rec, err := codec.GatherRuns(context.Background(), b.rec, [][]int32{r}, 1, pool)
				if err != nil {
					t.Fatal(err)
				}
				// Keep views of the memory, without references: freed.
				cols := make([]arrow.Array, rec.NumCols())
				for i, c := range rec.Columns() {
					d := aliasData(c.Data())
					cols[i] = array.MakeFromData(d)
					d.Release()
				}
				rec.Release()
				stale := array.NewRecordBatch(sc, cols, int64(len(r)))
				for _, c := range cols {
					c.Release()
				}
				func() {
					defer stale.Release()
					if err := fws[p].Write(stale); err != nil {
						panic(err)
					}
				}()
			}
		})
		for p := range want {
			if !bytes.Equal(early[p], want[p]) {
				return true
			}
		}
		return false
	}()
	if !detected {
		t.Error("writing batches freed early gave the same files: the test cannot see a reuse")
	}
}

// aliasData is d with its buffers (and its children's) wrapped without a
// reference: they see the memory whatever becomes of it. Its dictionary
// is d's, referenced.
func aliasData(d arrow.ArrayData) arrow.ArrayData {
	bufs := make([]*memory.Buffer, len(d.Buffers()))
	for i, b := range d.Buffers() {
		if b != nil {
			bufs[i] = memory.NewBufferBytes(b.Bytes())
		}
	}
	children := make([]arrow.ArrayData, len(d.Children()))
	for i, c := range d.Children() {
		children[i] = aliasData(c)
		defer children[i].Release()
	}
	if dict, ok := d.Dictionary().(*array.Data); ok && dict != nil {
		return array.NewDataWithDictionary(d.DataType(), d.Len(), bufs, d.NullN(), d.Offset(), dict)
	}
	return array.NewData(d.DataType(), d.Len(), bufs, children, d.NullN(), d.Offset())
}
