package codec

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
)

// TestGatherRunsMatchesGather: GatherRuns gives, run after run, what
// gatherBatch gives for each run's rows, for every flat type (nulls,
// strings, large strings, binaries, booleans, fixed-size binaries,
// decimals), dictionaries, lists, a struct and a null column; on a
// sliced batch; with empty runs, one run, runs of single rows, and runs
// that leave rows out.
func TestGatherRunsMatchesGather(t *testing.T) {
	mem, ctx := checkedMem(t)
	full := flatBatch(mem, 500, 7)
	defer full.Release()
	list := array.NewListBuilder(mem, arrow.BinaryTypes.String)
	defer list.Release()
	st := array.NewStructBuilder(mem, arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}))
	defer st.Release()
	for i := range 500 {
		if i%5 == 0 {
			list.AppendNull()
		} else {
			list.Append(true)
			for j := range i % 3 {
				list.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("v%d.%d", i, j))
			}
		}
		if i%7 == 0 {
			st.AppendNull()
		} else {
			st.Append(true)
			st.FieldBuilder(0).(*array.Int32Builder).Append(int32(i))
		}
	}
	la, sa := list.NewArray(), st.NewArray()
	defer la.Release()
	defer sa.Release()
	cols := append(append([]arrow.Array{}, full.Columns()...), la, sa)
	fields := append(append([]arrow.Field{}, full.Schema().Fields()...),
		arrow.Field{Name: "list", Type: la.DataType(), Nullable: true}, arrow.Field{Name: "struct", Type: sa.DataType(), Nullable: true})
	sc := arrow.NewSchema(fields, nil)
	rec := array.NewRecordBatch(sc, cols, 500)
	defer rec.Release()

	rng := rand.New(rand.NewPCG(9, 9))
	// split deals the rows [0, n) to parts parts at random, keeping a
	// fraction keep of them.
	split := func(n, parts int, keep float64) [][]int32 {
		runs := make([][]int32, parts)
		for row := range n {
			if rng.Float64() < keep {
				p := rng.IntN(parts)
				runs[p] = append(runs[p], int32(row))
			}
		}
		return runs
	}
	for _, tc := range []struct {
		name   string
		lo, hi int64
		runs   func(n int) [][]int32
	}{
		{"64 parts", 0, 500, func(n int) [][]int32 { return split(n, 64, 1) }},
		{"3 parts, sliced", 37, 451, func(n int) [][]int32 { return split(n, 3, 1) }},
		{"some rows", 0, 500, func(n int) [][]int32 { return split(n, 5, 0.3) }},
		{"one part", 11, 500, func(n int) [][]int32 { return split(n, 1, 1) }},
		{"empty runs", 0, 500, func(n int) [][]int32 { return [][]int32{nil, {3, 9, 400}, {}, {0}, nil} }},
		{"no runs", 0, 500, func(n int) [][]int32 { return nil }},
		{"single rows", 0, 500, func(n int) [][]int32 { return [][]int32{{499}, {0}, {250}} }},
		{"empty batch", 0, 0, func(n int) [][]int32 { return [][]int32{{}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := rec.NewSlice(tc.lo, tc.hi)
			defer src.Release()
			runs := tc.runs(int(src.NumRows()))
			got, err := GatherRuns(ctx, src, runs, 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if !got.Schema().Equal(sc) {
				t.Fatalf("schema %s", got.Schema())
			}
			from := int64(0)
			for r, run := range runs {
				to := from + int64(len(run))
				part := got.NewSlice(from, to)
				var want arrow.RecordBatch
				if len(run) == 0 {
					want = src.NewSlice(0, 0)
				} else if want, err = gatherBatch(ctx, sc, src, run); err != nil {
					t.Fatal(err)
				}
				for i := range int(sc.NumFields()) {
					g, w := part.Column(i), want.Column(i)
					if !array.Equal(g, w) || g.NullN() != w.NullN() {
						t.Errorf("run %d, column %q: got %v, want %v", r, sc.Field(i).Name, g, w)
					}
				}
				part.Release()
				want.Release()
				from = to
			}
			if from != got.NumRows() {
				t.Errorf("%d rows, runs hold %d", got.NumRows(), from)
			}
			if err := ValidateBatch(got); err != nil {
				t.Errorf("gathered batch invalid: %v", err)
			}
		})
	}
	t.Run("a row twice", func(t *testing.T) {
		if b, err := GatherRuns(ctx, rec, [][]int32{{1, 2}, {2}}, 2, nil); err == nil {
			b.Release()
			t.Fatal("no error")
		}
	})
	t.Run("a row out of range", func(t *testing.T) {
		if b, err := GatherRuns(ctx, rec, [][]int32{{1, 500}}, 2, nil); err == nil {
			b.Release()
			t.Fatal("no error")
		}
	})
}

// TestGatherRunsUnzeroed: with an allocator that hands out uncleared
// memory (the store's pools), nothing of what was in a buffer before
// shows in a gathered batch: not in null slots' validity, not in the
// padding of its buffers.
func TestGatherRunsUnzeroed(t *testing.T) {
	mem, _ := checkedMem(t)
	dirty := &dirtyAllocator{Allocator: mem}
	rec := flatBatch(mem, 300, 3)
	defer rec.Release()
	runs := [][]int32{{1, 5, 7, 200}, {0, 2, 299}, {3}}
	want, err := GatherRuns(compute.WithAllocator(context.Background(), mem), rec, runs, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Release()
	got, err := GatherRuns(compute.WithAllocator(context.Background(), mem), rec, runs, 2, dirty)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	for i := range int(rec.NumCols()) {
		g, w := got.Column(i), want.Column(i)
		if !array.Equal(g, w) || g.NullN() != w.NullN() {
			t.Errorf("column %q: got %v, want %v", rec.Schema().Field(i).Name, g, w)
		}
		if !Scatterable(rec.Column(i)) {
			continue
		}
		for j, b := range g.Data().Buffers() {
			if b == nil {
				continue
			}
			for k, x := range b.Buf()[b.Len():] {
				if x != 0 {
					t.Errorf("column %q buffer %d: padding byte %d is %#x", rec.Schema().Field(i).Name, j, b.Len()+k, x)
					break
				}
			}
			if j == 0 {
				// Validity: the bits past the last row are clear.
				bs := b.Bytes()
				if n := int(g.Len()); n%8 != 0 && bs[len(bs)-1]>>(n%8) != 0 {
					t.Errorf("column %q: validity bits past the end set: %#x", rec.Schema().Field(i).Name, bs[len(bs)-1])
				}
			}
		}
	}
	if dirty.unzeroed.Load() == 0 {
		t.Error("the dirty allocator was never asked for uncleared memory")
	}
}

// dirtyAllocator hands out memory filled with 0xEE when asked for it
// uncleared (UnzeroedAllocator).
type dirtyAllocator struct {
	memory.Allocator
	unzeroed atomic.Int64
}

func (d *dirtyAllocator) AllocateUnzeroed(size int) []byte {
	d.unzeroed.Add(1)
	b := d.Allocator.Allocate(size)
	for i := range b[:cap(b)] {
		b[:cap(b)][i] = 0xEE
	}
	return b
}

func (d *dirtyAllocator) ReallocateUnzeroed(size int, b []byte) []byte {
	nb := d.AllocateUnzeroed(size)
	copy(nb, b)
	d.Allocator.Free(b)
	return nb
}

func BenchmarkGatherRuns(b *testing.B) {
	rec := benchBatch(memory.DefaultAllocator, 256<<10, 20, 64, rand.New(rand.NewPCG(1, 2)))
	defer rec.Release()
	ctx := context.Background()
	g, err := GroupByPartition(ctx, rec, []string{"p"})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Release()
	var runs [][]int32
	for _, p := range g.Parts {
		runs = append(runs, p.Rows)
	}
	b.SetBytes(util.TotalRecordSize(g.Data))
	b.Run("gatherBatch per part", func(b *testing.B) {
		for b.Loop() {
			for _, run := range runs {
				r, err := gatherBatch(ctx, g.Data.Schema(), g.Data, run)
				if err != nil {
					b.Fatal(err)
				}
				r.Release()
			}
		}
	})
	b.Run("GatherRuns", func(b *testing.B) {
		for b.Loop() {
			r, err := GatherRuns(ctx, g.Data, runs, 1, nil)
			if err != nil {
				b.Fatal(err)
			}
			r.Release()
		}
	})
}
