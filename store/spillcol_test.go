package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sys/unix"
	"pgregory.net/rapid"

	"github.com/quiverdb/quiver/store/codec"
)

// spillColTypes are the column types the spill writes by columns, and
// one (a dictionary) that sends a batch to IPC blocks.
var spillColTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Float16,
	arrow.FixedWidthTypes.Boolean, arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString,
	arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary,
	&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, arrow.FixedWidthTypes.Date32,
	&arrow.Decimal128Type{Precision: 10, Scale: 2}, &arrow.FixedSizeBinaryType{ByteWidth: 3},
}

// randomColumn is n random values of dt, each null with probability
// nulls/8 (none when nulls is 0), from a random slice of a longer array
// (an offset not a multiple of 8).
func randomColumn(rt *rapid.T, mem memory.Allocator, dt arrow.DataType, n, nulls int, label string) arrow.Array {
	skip := rapid.IntRange(0, 9).Draw(rt, label+"-skip")
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	for i := range n + skip {
		if nulls > 0 && rapid.IntRange(0, 7).Draw(rt, label+"-null") < nulls {
			b.AppendNull()
			continue
		}
		v := rapid.Int64Range(-1000, 1000).Draw(rt, label) + int64(i)
		switch b := b.(type) {
		case *array.Int8Builder:
			b.Append(int8(v))
		case *array.Int16Builder:
			b.Append(int16(v))
		case *array.Int32Builder:
			b.Append(int32(v))
		case *array.Int64Builder:
			b.Append(v)
		case *array.Float32Builder:
			b.Append(float32(v) / 3)
		case *array.Float64Builder:
			b.Append(float64(v) / 7)
		case *array.Float16Builder:
			b.Append(float16.New(float32(v)))
		case *array.BooleanBuilder:
			b.Append(v%3 == 0)
		case *array.StringBuilder:
			b.Append(fmt.Sprintf("%d-%0*d", v, int(v&15), i))
		case *array.LargeStringBuilder:
			b.Append(fmt.Sprintf("%x", v*v))
		case *array.BinaryBuilder:
			b.Append([]byte(fmt.Sprint(v, "abc"))[:int(v&3)])
		case *array.TimestampBuilder:
			b.Append(arrow.Timestamp(v * 1_000_003))
		case *array.Date32Builder:
			b.Append(arrow.Date32(v))
		case *array.Decimal128Builder:
			b.Append(decimal128.FromI64(v * 101))
		case *array.FixedSizeBinaryBuilder:
			b.Append([]byte{byte(v), byte(v >> 8), byte(i)})
		case *array.BinaryDictionaryBuilder:
			if err := b.AppendString(fmt.Sprint(v % 5)); err != nil {
				rt.Fatal(err)
			}
		default:
			rt.Fatalf("no random values of %T", b)
		}
	}
	whole := b.NewArray()
	defer whole.Release()
	return array.NewSlice(whole, int64(skip), int64(skip+n))
}

// TestSpillByColumnsRoundTrip: batches of random columns (every type the
// spill writes by columns, with and without nulls, at odd offsets),
// their rows spread over random partitions, some batches with a
// dictionary column or a column over spillColumnBytes (IPC blocks, in the
// same partitions), added to a
// spill and replayed in a random interleaving (a partition at a time,
// early as the spill's take does, or as its bound picks), with chunks of
// a few KiB punched as they are freed: every partition's rows come back
// as sent, in order; the file holds no more than its bound after each
// batch, and no more than its last chunk at the end (every byte of a
// segment belongs to one block); and all memory is given back.
func TestSpillByColumnsRoundTrip(t *testing.T) {
	orig, origSlack, origColumn := spillChunk, spillSlack, spillColumnBytes
	t.Cleanup(func() { spillChunk, spillSlack, spillColumnBytes = orig, origSlack, origColumn })
	dir := t.TempDir()
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		spillColumnBytes = int64(rapid.SampledFrom([]int{1 << 30, 1 << 30, 2048}).Draw(rt, "column bytes"))
		spillChunk = int64(rapid.SampledFrom([]int{4096, 8192, 65536}).Draw(rt, "chunk"))
		spillSlack = int64(rapid.SampledFrom([]int{0, 16 << 10, 1 << 30}).Draw(rt, "slack"))
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(rt, 0)
		sp, err := openSpill(dir, mem)
		if err != nil {
			rt.Fatal(err)
		}
		defer sp.Close()
		ncols := rapid.IntRange(1, 5).Draw(rt, "cols")
		fields := []arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int32}}
		nulls := []int{0}
		for c := range ncols {
			dt := rapid.SampledFrom(spillColTypes).Draw(rt, "type")
			fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%d", c), Type: dt, Nullable: true})
			nulls = append(nulls, rapid.SampledFrom([]int{0, 0, 1, 4, 8}).Draw(rt, "nulls"))
		}
		withDict := rapid.Bool().Draw(rt, "dictionary")
		if withDict {
			fields = append(fields, arrow.Field{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}, Nullable: true})
			nulls = append(nulls, 1)
		}
		sc := arrow.NewSchema(fields, nil)
		nparts := rapid.IntRange(1, 7).Draw(rt, "parts")
		// want[p] are the rows sent to partition p, as single-row batches
		// of the sent ones; got[p] the rows replayed.
		want := make([][]arrow.RecordBatch, nparts)
		got := make([][]arrow.RecordBatch, nparts)
		defer func() {
			for p := range nparts {
				releaseBatches(want[p])
				releaseBatches(got[p])
			}
		}()
		collect := func(g *codec.Grouped) error {
			defer g.Release()
			var p int
			if _, err := fmt.Sscanf(g.Parts[0].Dir, "k=%d", &p); err != nil {
				return err
			}
			if g.Data.NumRows() != int64(len(g.Parts[0].Rows)) {
				return fmt.Errorf("a replayed batch of %d rows lists %d", g.Data.NumRows(), len(g.Parts[0].Rows))
			}
			g.Data.Retain()
			got[p] = append(got[p], g.Data)
			return nil
		}
		sp.to = spillTo{early: collect, rows: collect}
		sp.early = spillSize{rows: int64(rapid.IntRange(1, 2000).Draw(rt, "early")), bytes: 1 << 30}
		replay := func(p int) {
			if part := sp.byDir[fmt.Sprintf("k=%d", p)]; part != nil {
				if err := sp.replayPart(ctx, part, spillSize{rows: int64(rapid.IntRange(1, 700).Draw(rt, "batch")), bytes: 1 << 30}, collect); err != nil {
					rt.Fatal(err)
				}
			}
		}
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for range steps {
			if rapid.IntRange(0, 3).Draw(rt, "op") == 0 {
				replay(rapid.IntRange(0, nparts-1).Draw(rt, "replay"))
				continue
			}
			n := rapid.IntRange(1, 400).Draw(rt, "rows")
			dict := withDict && rapid.Bool().Draw(rt, "dictionary batch")
			cols := make([]arrow.Array, len(fields))
			kb := array.NewInt32Builder(mem)
			for range n {
				kb.Append(int32(rapid.IntRange(0, nparts-1).Draw(rt, "k")))
			}
			cols[0] = kb.NewArray()
			kb.Release()
			for c := 1; c < len(fields); c++ {
				if fields[c].Name == "d" && !dict {
					cols[c] = array.MakeArrayOfNull(mem, fields[c].Type, n)
					continue
				}
				cols[c] = randomColumn(rt, mem, fields[c].Type, n, nulls[c], fields[c].Name)
			}
			rec := array.NewRecordBatch(sc, cols, int64(n))
			releaseAll(cols)
			g, err := codec.GroupByPartition(ctx, rec, []string{"k"})
			if err != nil {
				rt.Fatal(err)
			}
			for _, part := range g.Parts {
				var p int
				if _, err := fmt.Sscanf(part.Dir, "k=%d", &p); err != nil {
					rt.Fatal(err)
				}
				for _, r := range part.Rows {
					want[p] = append(want[p], g.Data.NewSlice(int64(r), int64(r+1)))
				}
			}
			err = sp.add(ctx, g, 2)
			g.Release()
			rec.Release()
			if err != nil {
				rt.Fatal(err)
			}
			if err := sp.bound(ctx, sp.early, collect); err != nil {
				rt.Fatal(err)
			}
			if bound := max(spillSlack, spillHeldRatio*sp.waiting()) + spillChunk; !sp.noPunch && sp.held() > bound {
				rt.Fatalf("the spill holds %d bytes, %d waiting: more than %d", sp.held(), sp.waiting(), bound)
			}
		}
		for p := range nparts {
			replay(p)
		}
		var st unix.Stat_t
		if err := unix.Fstat(sp.fd, &st); err != nil {
			rt.Fatal(err)
		}
		if held := st.Blocks * 512; !sp.noPunch && held > spillChunk+4096 {
			rt.Fatalf("%d bytes held after every block was replayed (%d written, chunks of %d)", held, sp.end, spillChunk)
		}
		for p := range nparts {
			j := 0
			for _, b := range got[p] {
				for r := range b.NumRows() {
					if j >= len(want[p]) {
						rt.Fatalf("partition %d: more rows replayed than sent (%d)", p, len(want[p]))
					}
					if got, sent := rowText(b, int(r)), rowText(want[p][j], 0); got != sent {
						rt.Fatalf("partition %d, row %d: replayed %s, sent %s", p, j, got, sent)
					}
					j++
				}
			}
			if j != len(want[p]) {
				rt.Fatalf("partition %d: %d rows replayed, %d sent", p, j, len(want[p]))
			}
		}
	})
}

// rowText is row r of rec as text: its columns' types and values
// (a dictionary's decoded).
func rowText(rec arrow.RecordBatch, r int) string {
	s := ""
	for i, c := range rec.Columns() {
		v := "null"
		if c.IsValid(r) {
			v = c.ValueStr(r)
		}
		s += fmt.Sprintf("%s %s=%s; ", rec.Schema().Field(i).Type, rec.ColumnName(i), v)
	}
	return s
}
