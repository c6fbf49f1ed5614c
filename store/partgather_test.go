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
		t.Run(fmt.Sprintf("chunks of %d bytes", chunk), func(t *testing.T) {
			defer func(old int64) { gatherChunkBytes = old }(gatherChunkBytes)
			gatherChunkBytes = chunk
			got := write(t, func(fws []*codec.FileWriter, rec arrow.RecordBatch, rows [][]int32) {
				var parts []partWrite
				for p, r := range rows {
					parts = append(parts, partWrite{k: &sink{fw: fws[p]}, data: rec, rows: r})
				}
				if err := writeParts(ctx, parts, 1<<30); err != nil {
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
