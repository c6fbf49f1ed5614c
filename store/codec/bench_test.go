package codec

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
)

// benchBatch is rows rows of cols columns: "p", a string partition key with
// parts values in random order, then int64, float64 and string columns in
// turn.
func benchBatch(mem memory.Allocator, rows, cols, parts int, r *rand.Rand) arrow.RecordBatch {
	fields := []arrow.Field{field("p", arrow.BinaryTypes.String, true)}
	for c := 1; c < cols; c++ {
		dt := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64, arrow.BinaryTypes.String}[c%3]
		fields = append(fields, field(fmt.Sprintf("c%d", c), dt, true))
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	keys := make([]string, parts)
	for i := range keys {
		keys[i] = fmt.Sprintf("region-%03d", i)
	}
	for i := 0; i < rows; i++ {
		b.Field(0).(*array.StringBuilder).Append(keys[r.IntN(parts)])
		for c := 1; c < cols; c++ {
			switch fb := b.Field(c).(type) {
			case *array.Int64Builder:
				fb.Append(r.Int64())
			case *array.Float64Builder:
				fb.Append(r.Float64())
			case *array.StringBuilder:
				fb.Append("value-" + keys[r.IntN(parts)])
			}
		}
	}
	return b.NewRecordBatch()
}

func BenchmarkSplitByPartition(b *testing.B) {
	impls := []struct {
		name  string
		split func(ctx context.Context, rec arrow.RecordBatch) (int, error)
	}{
		{"rowbyrow", func(ctx context.Context, rec arrow.RecordBatch) (int, error) {
			_, out, err := splitRowByRow(ctx, rec, []int{0}, []string{"p"})
			for _, o := range out {
				o.Release()
			}
			return len(out), err
		}},
		{"vectorised", func(ctx context.Context, rec arrow.RecordBatch) (int, error) {
			parts, err := SplitByPartition(ctx, rec, []string{"p"})
			releaseParts(parts)
			return len(parts), err
		}},
	}
	for _, size := range []struct{ rows, cols, parts int }{{64 << 10, 20, 64}, {1 << 20, 20, 64}, {1 << 20, 20, 4}, {1 << 20, 2, 64}} {
		rec := benchBatch(memory.DefaultAllocator, size.rows, size.cols, size.parts, rand.New(rand.NewPCG(1, 2)))
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%s/rows=%d/cols=%d/parts=%d", impl.name, size.rows, size.cols, size.parts), func(b *testing.B) {
				b.SetBytes(util.TotalRecordSize(rec))
				b.ReportAllocs()
				for b.Loop() {
					n, err := impl.split(context.Background(), rec)
					if err != nil || n != size.parts {
						b.Fatalf("%d parts, %v", n, err)
					}
				}
			})
		}
		rec.Release()
	}
}

// splitRowByRow is the split the store used before this package: runs of
// equal rows found row by row, a key formatted per run, one Take per
// partition spread over several runs. Kept to check and measure the
// vectorised split against.
func splitRowByRow(ctx context.Context, rec arrow.RecordBatch, by []int, names []string) ([]string, []arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	if n == 0 {
		return nil, nil, nil
	}
	cols := make([]arrow.Array, len(by))
	for i, c := range by {
		cols[i] = rec.Column(c)
	}
	values := make([]string, len(by))
	nulls := make([]bool, len(by))
	dirOf := map[string]string{}
	var raw strings.Builder
	keyOf := func(row int) (string, error) {
		raw.Reset()
		for i, c := range cols {
			v, ok := FormatPartValue(c, row)
			values[i], nulls[i] = v, !ok
			if ok {
				raw.WriteByte(1)
				raw.WriteString(v)
			} else {
				raw.WriteByte(0)
			}
		}
		if d, ok := dirOf[raw.String()]; ok {
			return d, nil
		}
		d, err := PartitionDir(names, values, nulls)
		if err == nil {
			dirOf[raw.String()] = d
		}
		return d, err
	}
	eq := make([]func(i, j int) bool, len(cols))
	for i, c := range cols {
		eq[i] = equalRows(c)
	}
	same := func(i, j int) bool {
		for _, f := range eq {
			if !f(i, j) {
				return false
			}
		}
		return true
	}
	type run struct{ start, end int }
	var order []string
	runs := map[string][]run{}
	start := 0
	for row := 1; row <= n; row++ {
		if row < n && same(row-1, row) {
			continue
		}
		k, err := keyOf(start)
		if err != nil {
			return nil, nil, err
		}
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], run{start, row})
		start = row
	}
	out := make([]arrow.RecordBatch, 0, len(order))
	for _, k := range order {
		rs := runs[k]
		if len(rs) == 1 {
			out = append(out, rec.NewSlice(int64(rs[0].start), int64(rs[0].end)))
			continue
		}
		bld := array.NewInt64Builder(compute.GetAllocator(ctx))
		for _, r := range rs {
			for i := r.start; i < r.end; i++ {
				bld.Append(int64(i))
			}
		}
		idx := bld.NewArray()
		bld.Release()
		taken, err := compute.Take(ctx, *compute.DefaultTakeOptions(), compute.NewDatumWithoutOwning(rec), compute.NewDatumWithoutOwning(idx))
		idx.Release()
		if err != nil {
			for _, o := range out {
				o.Release()
			}
			return nil, nil, err
		}
		out = append(out, taken.(*compute.RecordDatum).Value)
	}
	return order, out, nil
}

// equalRows is the old split's comparison of two rows of a column.
func equalRows(a arrow.Array) func(i, j int) bool {
	nullEq := func(i, j int) (bool, bool) {
		ni, nj := a.IsNull(i), a.IsNull(j)
		if ni || nj {
			return ni == nj, true
		}
		return false, false
	}
	switch c := a.(type) {
	case *array.Int64:
		return func(i, j int) bool {
			if r, ok := nullEq(i, j); ok {
				return r
			}
			return c.Value(i) == c.Value(j)
		}
	case *array.String:
		return func(i, j int) bool {
			if r, ok := nullEq(i, j); ok {
				return r
			}
			return c.Value(i) == c.Value(j)
		}
	}
	return func(i, j int) bool { return array.SliceEqual(a, int64(i), int64(i+1), a, int64(j), int64(j+1)) }
}
