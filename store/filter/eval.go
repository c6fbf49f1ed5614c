package filter

import (
	"context"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Truth values of a row (Kleene logic).
const (
	tFalse uint8 = 0
	tTrue  uint8 = 1
	tNull  uint8 = 2
)

func kleeneAnd(a, b uint8) uint8 {
	switch {
	case a == tFalse || b == tFalse:
		return tFalse
	case a == tNull || b == tNull:
		return tNull
	}
	return tTrue
}

func kleeneOr(a, b uint8) uint8 {
	switch {
	case a == tTrue || b == tTrue:
		return tTrue
	case a == tNull || b == tNull:
		return tNull
	}
	return tFalse
}

func kleeneNot(a uint8) uint8 {
	switch a {
	case tTrue:
		return tFalse
	case tFalse:
		return tTrue
	}
	return tNull
}

// Apply returns the rows of rec for which the filter is true (rec itself,
// retained, when all are; nil when none is). rec must hold every column
// of Columns (by name) with the types the filter was bound to.
func (b *Bound) Apply(ctx context.Context, rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	mask, err := b.root.eval(ctx, rec)
	if err != nil {
		return nil, err
	}
	kept := 0
	for _, t := range mask {
		if t == tTrue {
			kept++
		}
	}
	switch kept {
	case len(mask):
		rec.Retain()
		return rec, nil
	case 0:
		return nil, nil
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return take(rec, mask, mem)
}

// take keeps the rows of rec whose mask is true: one run of rows is a
// zero-copy slice; several are sliced and concatenated per column. (Not
// arrow's compute Filter: its take kernel of strings can index past its
// buffer on batches decoded from Parquet, and panics on a goroutine of
// its own, where no recover can catch it.)
func take(rec arrow.RecordBatch, mask []uint8, mem memory.Allocator) (arrow.RecordBatch, error) {
	type run struct{ from, to int64 }
	var runs []run
	var rows int64
	for i := 0; i < len(mask); {
		if mask[i] != tTrue {
			i++
			continue
		}
		j := i
		for j < len(mask) && mask[j] == tTrue {
			j++
		}
		runs = append(runs, run{int64(i), int64(j)})
		rows += int64(j - i)
		i = j
	}
	if len(runs) == 1 {
		return rec.NewSlice(runs[0].from, runs[0].to), nil
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	parts := make([]arrow.Array, len(runs))
	for c, col := range rec.Columns() {
		for k, r := range runs {
			parts[k] = array.NewSlice(col, r.from, r.to)
		}
		out, err := array.Concatenate(parts, mem)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			return nil, fmt.Errorf("filter rows of column %q: %w", rec.ColumnName(c), err)
		}
		cols[c] = out
	}
	return array.NewRecordBatch(rec.Schema(), cols, rows), nil
}

// Mask evaluates the filter on every row of rec: 1 true, 0 false, 2 null.
func (b *Bound) Mask(rec arrow.RecordBatch) ([]uint8, error) {
	return b.root.eval(context.Background(), rec)
}

// eval evaluates n on rec. It checks ctx at every node: a filter of
// thousands of terms over a large batch is seconds of work, which must
// stop when its read does.
func (n *node) eval(ctx context.Context, rec arrow.RecordBatch) ([]uint8, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows := int(rec.NumRows())
	switch n.op {
	case OpAnd, OpOr:
		out, err := n.kids[0].eval(ctx, rec)
		if err != nil {
			return nil, err
		}
		for _, k := range n.kids[1:] {
			m, err := k.eval(ctx, rec)
			if err != nil {
				return nil, err
			}
			for i := range out {
				if n.op == OpAnd {
					out[i] = kleeneAnd(out[i], m[i])
				} else {
					out[i] = kleeneOr(out[i], m[i])
				}
			}
		}
		return out, nil
	case OpNot:
		out, err := n.kids[0].eval(ctx, rec)
		if err != nil {
			return nil, err
		}
		for i := range out {
			out[i] = kleeneNot(out[i])
		}
		return out, nil
	}
	idx := rec.Schema().FieldIndices(n.col)
	if len(idx) != 1 {
		return nil, fmt.Errorf("filter on %q: the batch lacks the column", n.col)
	}
	col := rec.Column(idx[0])
	if !arrow.TypeEqual(col.DataType(), n.dt) {
		return nil, fmt.Errorf("filter on %q: the batch's column is %s, the filter was bound to %s", n.col, col.DataType(), n.dt)
	}
	out := make([]uint8, rows)
	return out, n.leaf(col, out)
}

// leaf evaluates a column term into out.
func (n *node) leaf(col arrow.Array, out []uint8) error {
	if d, ok := col.(*array.Dictionary); ok {
		// Evaluate the dictionary's values once, then look rows up.
		dict := d.Dictionary()
		m := make([]uint8, dict.Len())
		if err := n.leaf(dict, m); err != nil {
			return err
		}
		for i := range out {
			if d.IsNull(i) {
				out[i] = tNull
				if n.op == OpIsNull {
					out[i] = tTrue
				} else if n.op == OpNotNull {
					out[i] = tFalse
				}
				continue
			}
			out[i] = m[d.GetValueIndex(i)]
		}
		return nil
	}
	switch n.op {
	case OpIsNull, OpNotNull:
		for i := range out {
			null := col.IsNull(i)
			if null == (n.op == OpIsNull) {
				out[i] = tTrue
			} else {
				out[i] = tFalse
			}
		}
		return nil
	}
	get, err := getter(col)
	if err != nil {
		return fmt.Errorf("filter on %q: %w", n.col, err)
	}
	for i := range out {
		if col.IsNull(i) {
			out[i] = tNull
			continue
		}
		if n.test(get(i)) {
			out[i] = tTrue
		} else {
			out[i] = tFalse
		}
	}
	return nil
}

// test applies a leaf's operator to one non-null value.
func (n *node) test(v val) bool {
	if n.kind == kFloat && math.IsNaN(v.f) {
		return n.op == OpNe // NaN equals nothing, orders with nothing
	}
	switch n.op {
	case OpIn:
		if n.set != nil {
			if n.kind == kFloat && v.f == 0 {
				v.f = 0 // -0 is 0
			}
			_, ok := n.set[v]
			return ok
		}
		for _, x := range n.vals {
			if cmpVal(n.kind, v, x) == 0 {
				return true
			}
		}
		return false
	}
	c := cmpVal(n.kind, v, n.vals[0])
	switch n.op {
	case OpEq:
		return c == 0
	case OpNe:
		return c != 0
	case OpLt:
		return c < 0
	case OpLe:
		return c <= 0
	case OpGt:
		return c > 0
	case OpGe:
		return c >= 0
	}
	return false
}

func ints[T ~int8 | ~int16 | ~int32 | ~int64](vs []T) func(int) val {
	return func(i int) val { return val{i: int64(vs[i])} }
}

func uints[T ~uint8 | ~uint16 | ~uint32 | ~uint64](vs []T) func(int) val {
	return func(i int) val { return val{u: uint64(vs[i])} }
}

// getter reads the values of an array of a comparable type.
func getter(col arrow.Array) (func(int) val, error) {
	switch a := col.(type) {
	case *array.Int8:
		return ints(a.Int8Values()), nil
	case *array.Int16:
		return ints(a.Int16Values()), nil
	case *array.Int32:
		return ints(a.Int32Values()), nil
	case *array.Int64:
		return ints(a.Int64Values()), nil
	case *array.Date32:
		return ints(a.Date32Values()), nil
	case *array.Date64:
		return ints(a.Date64Values()), nil
	case *array.Time32:
		return ints(a.Time32Values()), nil
	case *array.Time64:
		return ints(a.Time64Values()), nil
	case *array.Timestamp:
		return ints(a.TimestampValues()), nil
	case *array.Duration:
		return ints(a.DurationValues()), nil
	case *array.Uint8:
		return uints(a.Uint8Values()), nil
	case *array.Uint16:
		return uints(a.Uint16Values()), nil
	case *array.Uint32:
		return uints(a.Uint32Values()), nil
	case *array.Uint64:
		return uints(a.Uint64Values()), nil
	case *array.Float32:
		vs := a.Float32Values()
		return func(i int) val { return val{f: float64(vs[i])} }, nil
	case *array.Float64:
		vs := a.Float64Values()
		return func(i int) val { return val{f: vs[i]} }, nil
	case *array.String:
		return func(i int) val { return val{s: a.Value(i)} }, nil
	case *array.LargeString:
		return func(i int) val { return val{s: a.Value(i)} }, nil
	case *array.StringView:
		return func(i int) val { return val{s: a.Value(i)} }, nil
	case *array.Binary:
		return func(i int) val { return val{s: a.ValueString(i)} }, nil
	case *array.LargeBinary:
		return func(i int) val { return val{s: a.ValueString(i)} }, nil
	case *array.BinaryView:
		return func(i int) val { return val{s: a.ValueString(i)} }, nil
	case *array.Boolean:
		return func(i int) val { return val{b: a.Value(i)} }, nil
	case *array.Decimal128:
		return func(i int) val { return val{d: a.Value(i)} }, nil
	}
	return nil, fmt.Errorf("cannot compare values of type %s", col.DataType())
}
