package store

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"pgregory.net/rapid"

	"github.com/quiverdb/quiver/store/filter"
)

var rapidSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "p", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// row is one row as Go values (nil: null).
type row map[string]any

// naive evaluates e on one row with Kleene logic: 1 true, 0 false, 2 null.
// It is the reference the store's pruning and filtering are checked
// against.
func naive(e *filter.Expr, r row) uint8 {
	switch e.Op {
	case filter.OpAnd, filter.OpOr:
		out := naive(e.Args[0], r)
		for _, a := range e.Args[1:] {
			v := naive(a, r)
			if e.Op == filter.OpAnd {
				switch {
				case out == 0 || v == 0:
					out = 0
				case out == 2 || v == 2:
					out = 2
				}
			} else {
				switch {
				case out == 1 || v == 1:
					out = 1
				case out == 2 || v == 2:
					out = 2
				default:
					out = 0
				}
			}
		}
		return out
	case filter.OpNot:
		return [3]uint8{1, 0, 2}[naive(e.Args[0], r)]
	case filter.OpIsNull:
		if r[e.Col] == nil {
			return 1
		}
		return 0
	case filter.OpNotNull:
		if r[e.Col] != nil {
			return 1
		}
		return 0
	}
	v := r[e.Col]
	if v == nil {
		return 2
	}
	cmp := func(lit filter.Value) (int, bool) {
		switch x := v.(type) {
		case int64:
			n, _ := strconv.ParseInt(lit.Text, 10, 64)
			return compare(x, n), true
		case float64:
			f, _ := strconv.ParseFloat(lit.Text, 64)
			if math.IsNaN(x) {
				return 0, false
			}
			return compare(x, f), true
		case string:
			return compare(x, lit.Text), true
		case bool:
			return compare(b2i(x), b2i(lit.Bool)), true
		}
		panic(fmt.Sprintf("value %T", v))
	}
	if e.Op == filter.OpIn {
		for _, lit := range e.Values {
			if c, ok := cmp(lit); ok && c == 0 {
				return 1
			}
		}
		return 0
	}
	c, ok := cmp(e.Values[0])
	if !ok { // NaN
		if e.Op == filter.OpNe {
			return 1
		}
		return 0
	}
	t := map[filter.Op]bool{filter.OpEq: c == 0, filter.OpNe: c != 0, filter.OpLt: c < 0, filter.OpLe: c <= 0, filter.OpGt: c > 0, filter.OpGe: c >= 0}[e.Op]
	if t {
		return 1
	}
	return 0
}

func compare[T int64 | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func genValue(t *rapid.T, col string) filter.Value {
	switch col {
	case "s":
		return filter.Value{Kind: filter.KindString, Text: rapid.SampledFrom([]string{"", "a", "b", "bb", "c"}).Draw(t, "str")}
	case "b":
		return filter.Value{Kind: filter.KindBool, Bool: rapid.Bool().Draw(t, "bool")}
	case "x":
		return filter.Value{Kind: filter.KindNumber, Text: rapid.SampledFrom([]string{"-1.5", "0", "0.5", "2", "100"}).Draw(t, "float")}
	}
	return filter.Value{Kind: filter.KindNumber, Text: strconv.Itoa(rapid.IntRange(-2, 60).Draw(t, "int"))}
}

func genFilter(t *rapid.T, depth int) *filter.Expr {
	cols := []string{"id", "k", "x", "s", "b", "p"}
	switch k := rapid.IntRange(0, 6).Draw(t, "node"); {
	case depth < 3 && k == 0:
		return &filter.Expr{Op: filter.OpAnd, Args: []*filter.Expr{genFilter(t, depth+1), genFilter(t, depth+1)}}
	case depth < 3 && k == 1:
		return &filter.Expr{Op: filter.OpOr, Args: []*filter.Expr{genFilter(t, depth+1), genFilter(t, depth+1)}}
	case depth < 3 && k == 2:
		return &filter.Expr{Op: filter.OpNot, Args: []*filter.Expr{genFilter(t, depth+1)}}
	case k == 3:
		op := rapid.SampledFrom([]filter.Op{filter.OpIsNull, filter.OpNotNull}).Draw(t, "nullop")
		return &filter.Expr{Op: op, Col: rapid.SampledFrom(cols).Draw(t, "col")}
	case k == 4:
		col := rapid.SampledFrom(cols).Draw(t, "col")
		e := &filter.Expr{Op: filter.OpIn, Col: col}
		for range rapid.IntRange(1, 3).Draw(t, "n") {
			e.Values = append(e.Values, genValue(t, col))
		}
		return e
	}
	col := rapid.SampledFrom(cols).Draw(t, "col")
	op := rapid.SampledFrom([]filter.Op{filter.OpEq, filter.OpNe, filter.OpLt, filter.OpLe, filter.OpGt, filter.OpGe}).Draw(t, "op")
	return &filter.Expr{Op: op, Col: col, Values: []filter.Value{genValue(t, col)}}
}

// genRows draws rows with ids from start on (sorted, so that row-group
// statistics of id prune).
func genRows(t *rapid.T, start, n int, csv bool) []row {
	strs, floats := []string{"", "a", "b", "bb", "c"}, []float64{-1.5, 0, 0.5, 2, 3.25, math.NaN()}
	if csv { // values a CSV file gives back
		strs, floats = strs[1:], floats[:5]
	}
	out := make([]row, n)
	for i := range out {
		r := row{"id": int64(start + i)}
		maybe := func(name string, v any) {
			if rapid.IntRange(0, 4).Draw(t, "null") == 0 {
				r[name] = nil
			} else {
				r[name] = v
			}
		}
		maybe("k", int64(rapid.IntRange(0, 9).Draw(t, "k")))
		maybe("x", rapid.SampledFrom(floats).Draw(t, "x"))
		maybe("s", rapid.SampledFrom(strs).Draw(t, "s"))
		maybe("b", rapid.Bool().Draw(t, "b"))
		maybe("p", int64(rapid.IntRange(0, 2).Draw(t, "p")))
		out[i] = r
	}
	return out
}

func rowsReader(rows []row) array.RecordReader {
	bld := array.NewRecordBuilder(memory.DefaultAllocator, rapidSchema)
	defer bld.Release()
	for _, r := range rows {
		for i, f := range rapidSchema.Fields() {
			fb := bld.Field(i)
			v := r[f.Name]
			if v == nil {
				fb.AppendNull()
				continue
			}
			switch x := v.(type) {
			case int64:
				fb.(*array.Int64Builder).Append(x)
			case float64:
				fb.(*array.Float64Builder).Append(x)
			case string:
				fb.(*array.StringBuilder).Append(x)
			case bool:
				fb.(*array.BooleanBuilder).Append(x)
			}
		}
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	rdr, _ := array.NewRecordReader(rapidSchema, []arrow.RecordBatch{rec})
	return rdr
}

// Filtered reads (with partitions, several files, small row groups,
// projections and limits) return exactly the rows of the full read that
// the filter keeps, in order.
func TestFilterMatchesNaive(t *testing.T) {
	if f := flag.Lookup("rapid.nofailfile"); f != nil && f.Value.String() == f.DefValue {
		_ = flag.Set("rapid.nofailfile", "true") // the seed replays it
	}
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = flag.Set("rapid.checks", "30") // data sets; each is read with 6 filters
		defer flag.Set("rapid.checks", f.DefValue)
	}
	base := t.TempDir()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(rt, 0)
		s, err := Open(filepath.Join(base, strconv.Itoa(n)), WithAllocator(mem), WithRowGroupRows(int64(rapid.IntRange(3, 40).Draw(rt, "rowGroup"))))
		if err != nil {
			rt.Fatal(err)
		}
		keys := []string{"r", "p"}
		var all []row
		po := PutOptions{Mode: ModeWrite}
		if rapid.Bool().Draw(rt, "partitioned") {
			po.PartitionBy = []string{"p"}
		}
		if rapid.IntRange(0, 4).Draw(rt, "csv") == 0 {
			po.Format, po.PartitionBy = "csv", nil
		}
		for i := range rapid.IntRange(1, 3).Draw(rt, "puts") {
			rows := genRows(rt, len(all), rapid.IntRange(0, 60).Draw(rt, "rows"), po.Format == "csv")
			if i > 0 {
				po.Mode, po.PartitionBy = ModeAppend, nil
			}
			if po.Format == "csv" && len(rows) == 0 {
				continue
			}
			rdr := rowsReader(rows)
			_, err := s.Put(context.Background(), keys, rdr, po)
			rdr.Release()
			if err != nil {
				rt.Fatal(err)
			}
			all = append(all, rows...)
		}
		if len(all) == 0 {
			return
		}
		// The full read gives the order (partitioned files are grouped by
		// partition); the reference keeps the rows of it the filter passes.
		var order []int64
		rdr, err := s.Read(context.Background(), keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
		if err != nil {
			rt.Fatal(err)
		}
		for rdr.Next() {
			ids := rdr.RecordBatch().Column(rdr.Schema().FieldIndices("id")[0]).(*array.Int64)
			order = append(order, ids.Int64Values()...)
		}
		rdr.Release()
		for range 6 {
			checkFilter(rt, s, keys, all, order, po.Format == "csv")
		}
	})
}

// checkFilter reads keys with a random filter, projection and limit, and
// compares with the rows of the full read (order) the naive evaluation
// keeps.
func checkFilter(rt *rapid.T, s *Store, keys []string, all []row, order []int64, csv bool) {
	e := genFilter(rt, 0)
	limit := int64(0)
	if rapid.Bool().Draw(rt, "limited") {
		limit = int64(rapid.IntRange(1, 50).Draw(rt, "limit"))
	}
	var want []int64
	for _, id := range order {
		if naive(e, all[id]) == 1 && (limit == 0 || int64(len(want)) < limit) {
			want = append(want, id)
		}
	}
	cols := rapid.SampledFrom([][]string{nil, {"id"}, {"s", "id"}}).Draw(rt, "columns")
	o := ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest, Filter: e}, Columns: cols, Limit: limit, Join: rapid.Bool().Draw(rt, "join")}
	rdr, err := s.Read(context.Background(), keys, o)
	if csv && errors.Is(err, ErrInvalidArgument) {
		return // the CSV profile's inferred types do not take the literal
	}
	if err != nil {
		rt.Fatalf("%s: %v", e, err)
	}
	var got []int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if cols != nil && int(rec.NumCols()) != len(cols) {
			rt.Fatalf("%d columns, want %v", rec.NumCols(), cols)
		}
		got = append(got, rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64).Int64Values()...)
	}
	err = rdr.Err()
	rdr.Release()
	if err != nil {
		rt.Fatalf("%s: %v", e, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		rt.Fatalf("%s (limit %d): ids %v, want %v", e, limit, got, want)
	}
	// Planning's pruning keeps every file a matching row is in.
	sn, err := s.Snapshot(context.Background(), keys, SnapshotOptions{Version: Latest, Filter: e})
	if err != nil {
		rt.Fatal(err)
	}
	rows, err := s.PruneSnapshot(context.Background(), sn)
	if err != nil {
		rt.Fatal(err)
	}
	if rows >= 0 && limit == 0 && rows != int64(len(want)) {
		rt.Fatalf("%s: PruneSnapshot counts %d rows, the read %d", e, rows, len(want))
	}
	o.Files = nil
	rdr, err = s.ReadSnapshot(context.Background(), sn, ReadOptions{Columns: []string{"id"}})
	if err != nil {
		rt.Fatal(err)
	}
	var n2 int
	for rdr.Next() {
		n2 += int(rdr.RecordBatch().NumRows())
	}
	rdr.Release()
	if limit == 0 && n2 != len(want) {
		rt.Fatalf("%s: the pruned snapshot reads %d rows, want %d", e, n2, len(want))
	}
}
