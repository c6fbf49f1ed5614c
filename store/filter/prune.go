package filter

import (
	"math"
	"reflect"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// Outcome is what a filter can be for a group of rows known only by
// summaries (partition values, statistics): a set of truth values.
type Outcome uint8

// The truth values of an Outcome.
const (
	MayTrue  Outcome = 1 << tTrue
	MayFalse Outcome = 1 << tFalse
	MayNull  Outcome = 1 << tNull
	anything         = MayTrue | MayFalse | MayNull
)

// Possible reports whether some row may pass the filter: when false, the
// group can be skipped unread.
func (o Outcome) Possible() bool { return o&MayTrue != 0 }

// Always reports whether every row passes the filter.
func (o Outcome) Always() bool { return o == MayTrue }

// Summary is what is known about one column over a group of rows.
type Summary struct {
	// Known is false when nothing is (any value, any null).
	Known bool
	// HasMinMax: Min and Max bound the non-null values.
	HasMinMax bool
	min, max  val
	dt        arrow.DataType // the type of min and max
	// Nulls: some value may be null; Values: some value may be non-null.
	Nulls, Values bool
}

// unknown is the summary of a column nothing is known of.
var unknown = Summary{Nulls: true, Values: true}

// Stats gives the summary of a column (by name) over a group of rows.
type Stats func(col string) Summary

// Eval tells what the filter can be over a group of rows.
func (b *Bound) Eval(stats Stats) Outcome { return b.root.outcome(stats) }

func combine(a, b Outcome, f func(x, y uint8) uint8) Outcome {
	var out Outcome
	for x := uint8(0); x < 3; x++ {
		if a&(1<<x) == 0 {
			continue
		}
		for y := uint8(0); y < 3; y++ {
			if b&(1<<y) != 0 {
				out |= 1 << f(x, y)
			}
		}
	}
	return out
}

func (n *node) outcome(stats Stats) Outcome {
	switch n.op {
	case OpAnd, OpOr:
		o := n.kids[0].outcome(stats)
		for _, k := range n.kids[1:] {
			if n.op == OpAnd {
				o = combine(o, k.outcome(stats), kleeneAnd)
			} else {
				o = combine(o, k.outcome(stats), kleeneOr)
			}
		}
		return o
	case OpNot:
		o := n.kids[0].outcome(stats)
		var out Outcome
		for x := uint8(0); x < 3; x++ {
			if o&(1<<x) != 0 {
				out |= 1 << kleeneNot(x)
			}
		}
		return out
	}
	s := unknown
	if stats != nil {
		if got := stats(n.col); got.Known {
			s = got
		}
	}
	var o Outcome
	switch n.op {
	case OpIsNull, OpNotNull:
		if s.Nulls {
			o |= MayTrue
		}
		if s.Values {
			o |= MayFalse
		}
		if n.op == OpNotNull {
			o = o.swap()
		}
		return o
	}
	if s.Nulls {
		o |= MayNull
	}
	if !s.Values {
		return o
	}
	if !s.HasMinMax || !arrow.TypeEqual(s.dt, n.vt) {
		return o | MayTrue | MayFalse
	}
	return o | n.rangeOutcome(s.min, s.max)
}

// swap exchanges MayTrue and MayFalse.
func (o Outcome) swap() Outcome {
	out := o & MayNull
	if o&MayTrue != 0 {
		out |= MayFalse
	}
	if o&MayFalse != 0 {
		out |= MayTrue
	}
	return out
}

// rangeOutcome is what a comparison can be for non-null values in
// [lo, hi]. Float columns may hold NaN, which statistics leave out: a
// float comparison may always be false (and != always true).
func (n *node) rangeOutcome(lo, hi val) Outcome {
	k := n.kind
	in := func(x val) bool { return cmpVal(k, lo, x) <= 0 && cmpVal(k, x, hi) <= 0 }
	single := cmpVal(k, lo, hi) == 0
	var t, f bool
	switch n.op {
	case OpEq:
		t, f = in(n.vals[0]), !(single && cmpVal(k, lo, n.vals[0]) == 0)
	case OpNe:
		t, f = !(single && cmpVal(k, lo, n.vals[0]) == 0), in(n.vals[0])
	case OpLt:
		t, f = cmpVal(k, lo, n.vals[0]) < 0, cmpVal(k, hi, n.vals[0]) >= 0
	case OpLe:
		t, f = cmpVal(k, lo, n.vals[0]) <= 0, cmpVal(k, hi, n.vals[0]) > 0
	case OpGt:
		t, f = cmpVal(k, hi, n.vals[0]) > 0, cmpVal(k, lo, n.vals[0]) <= 0
	case OpGe:
		t, f = cmpVal(k, hi, n.vals[0]) >= 0, cmpVal(k, lo, n.vals[0]) < 0
	case OpIn:
		f = true
		for _, x := range n.vals {
			if in(x) {
				t = true
				if single {
					f = false
				}
			}
		}
	}
	if k == kFloat {
		f = true
		if n.op == OpNe {
			t = true
		}
	}
	var o Outcome
	if t {
		o |= MayTrue
	}
	if f {
		o |= MayFalse
	}
	return o
}

// PartitionStats summarizes partition columns whose value over a group of
// rows (a file) is one known value: values maps a column to a one-row
// array of it (a null row for the null partition). Other columns are
// unknown.
func PartitionStats(values map[string]arrow.Array) Stats {
	return func(col string) Summary {
		a, ok := values[col]
		if !ok || a.Len() != 1 {
			return Summary{}
		}
		if a.IsNull(0) {
			return Summary{Known: true, Nulls: true}
		}
		get, err := getter(a)
		if err != nil {
			return Summary{}
		}
		v := get(0)
		return Summary{Known: true, Values: true, HasMinMax: true, min: v, max: v, dt: a.DataType()}
	}
}

// Chain asks each Stats in turn, the first that knows the column answers.
func Chain(ss ...Stats) Stats {
	return func(col string) Summary {
		for _, s := range ss {
			if s == nil {
				continue
			}
			if got := s(col); got.Known {
				return got
			}
		}
		return Summary{}
	}
}

// RowGroupStats summarizes the columns of one Parquet row group from its
// statistics. leaf gives the Parquet column (leaf) index of a top-level
// column and its Arrow type as read, or false for a column that is not a
// single leaf. Statistics are used only where the stored values are the
// column's values as read (same unit, same order); otherwise the column
// is unknown.
func RowGroupStats(rg *metadata.RowGroupMetaData, leaf func(col string) (int, arrow.DataType, bool)) Stats {
	rows := rg.NumRows()
	return func(col string) Summary {
		i, dt, ok := leaf(col)
		if !ok || i < 0 || i >= rg.NumColumns() {
			return Summary{}
		}
		cc, err := rg.ColumnChunk(i)
		if err != nil {
			return Summary{}
		}
		st, err := cc.Statistics()
		if err != nil || st == nil {
			return Summary{}
		}
		s := Summary{Known: true, Nulls: true, Values: true}
		if st.HasNullCount() {
			s.Nulls = st.NullCount() > 0
			s.Values = st.NullCount() < rows
		}
		if !s.Values || !st.HasMinMax() || !bothBounds(cc) {
			return s
		}
		if d, ok := dt.(*arrow.DictionaryType); ok {
			dt = d.ValueType
		}
		lo, hi, ok := statRange(st, dt)
		if ok {
			s.HasMinMax, s.min, s.max, s.dt = true, lo, hi, dt
		}
		return s
	}
}

// statRange converts a chunk's min and max to values of the Arrow type
// dt, when the stored values are dt's values in dt's order.
func statRange(st metadata.TypedStatistics, dt arrow.DataType) (lo, hi val, ok bool) {
	k, ok := kindOf(dt)
	if !ok {
		return val{}, val{}, false
	}
	descr := st.Descr()
	lt := descr.LogicalType()
	unitOK := func(u arrow.TimeUnit) bool {
		var pu schema.TimeUnitType
		switch l := lt.(type) {
		case *schema.TimestampLogicalType:
			pu = l.TimeUnit()
		case *schema.TimeLogicalType:
			pu = l.TimeUnit()
		default:
			return false
		}
		switch u {
		case arrow.Millisecond:
			return pu == schema.TimeUnitMillis
		case arrow.Microsecond:
			return pu == schema.TimeUnitMicros
		case arrow.Nanosecond:
			return pu == schema.TimeUnitNanos
		}
		return false
	}
	switch dt.ID() {
	case arrow.DATE64, arrow.FLOAT16:
		return val{}, val{}, false // stored as other units
	case arrow.TIMESTAMP:
		if !unitOK(dt.(*arrow.TimestampType).Unit) {
			return val{}, val{}, false
		}
	case arrow.TIME32, arrow.TIME64:
		if !unitOK(dt.(arrow.TemporalWithUnit).TimeUnit()) {
			return val{}, val{}, false
		}
	}
	if k == kUint && descr.SortOrder() != schema.SortUNSIGNED {
		return val{}, val{}, false
	}
	switch s := st.(type) {
	case *metadata.Int32Statistics:
		switch k {
		case kInt:
			return val{i: int64(s.Min())}, val{i: int64(s.Max())}, true
		case kUint:
			return val{u: uint64(uint32(s.Min()))}, val{u: uint64(uint32(s.Max()))}, true
		}
	case *metadata.Int64Statistics:
		switch k {
		case kInt:
			return val{i: s.Min()}, val{i: s.Max()}, true
		case kUint:
			return val{u: uint64(s.Min())}, val{u: uint64(s.Max())}, true
		}
	case *metadata.Float32Statistics:
		if k == kFloat && !math.IsNaN(float64(s.Min())) && !math.IsNaN(float64(s.Max())) {
			return val{f: float64(s.Min())}, val{f: float64(s.Max())}, true
		}
	case *metadata.Float64Statistics:
		if k == kFloat && !math.IsNaN(s.Min()) && !math.IsNaN(s.Max()) {
			return val{f: s.Min()}, val{f: s.Max()}, true
		}
	case *metadata.BooleanStatistics:
		if k == kBool {
			return val{b: s.Min()}, val{b: s.Max()}, true
		}
	case *metadata.ByteArrayStatistics:
		if k == kString && st.Type() == parquet.Types.ByteArray {
			return val{s: string(s.Min())}, val{s: string(s.Max())}, true
		}
	}
	return val{}, val{}, false
}

// bothBounds reports whether a column chunk's statistics store both a
// minimum and a maximum. arrow-go counts a chunk with either as having
// both, the other one its type's zero value; writers drop one when it is
// too long (pyarrow and arrow-go keep no maximum over 4 KiB), and pruning
// by the made-up bound dropped matching rows. The thrift fields are not
// exported: they are looked at by reflection, read only; when they cannot
// be found (another arrow-go), no bound is trusted.
func bothBounds(cc *metadata.ColumnChunkMetaData) bool {
	v := reflect.ValueOf(cc)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return false
	}
	meta := v.Elem().FieldByName("columnMeta")
	if !meta.IsValid() || meta.Kind() != reflect.Pointer || meta.IsNil() {
		return false
	}
	st := meta.Elem().FieldByName("Statistics")
	if !st.IsValid() || st.Kind() != reflect.Pointer || st.IsNil() {
		return false
	}
	set := func(name string) bool {
		f := st.Elem().FieldByName(name)
		return f.IsValid() && f.Kind() == reflect.Slice && !f.IsNil()
	}
	// A pair of the same kind: arrow-go reads min_value and max_value for
	// columns in type-defined order, the deprecated min and max otherwise.
	return set("MinValue") && set("MaxValue") || set("Min") && set("Max")
}
