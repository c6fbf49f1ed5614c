package filter

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// colKind is how a column's values compare.
type colKind uint8

const (
	kInt colKind = iota + 1 // signed integers, dates, times, timestamps, durations
	kUint
	kFloat
	kString // strings and binaries, byte-wise
	kBool   // false < true
	kDecimal
)

// val is one value of a column (the field of its kind is set).
type val struct {
	i int64
	u uint64
	f float64
	s string
	b bool
	d decimal128.Num
}

func cmpVal(k colKind, a, b val) int {
	switch k {
	case kInt:
		return cmpOrd(a.i, b.i)
	case kUint:
		return cmpOrd(a.u, b.u)
	case kFloat:
		return cmpOrd(a.f, b.f)
	case kString:
		return strings.Compare(a.s, b.s)
	case kBool:
		switch {
		case a.b == b.b:
			return 0
		case b.b:
			return -1
		}
		return 1
	case kDecimal:
		return a.d.Cmp(b.d)
	}
	return 0
}

func cmpOrd[T int64 | uint64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Bound is a filter checked against a schema: every column exists and
// every literal is a value of its column's type. It is immutable and safe
// for concurrent use.
type Bound struct {
	expr *Expr
	root *node
	cols []string
}

type node struct {
	op   Op
	kids []*node
	col  string
	dt   arrow.DataType // the column's type (dictionaries: as stored)
	vt   arrow.DataType // the type of its values (a dictionary's value type)
	kind colKind
	vals []val
	set  map[val]struct{} // of vals, for a long "in" list
}

// Expr is the filter as parsed.
func (b *Bound) Expr() *Expr { return b.expr }

// Columns lists the columns the filter reads, sorted.
func (b *Bound) Columns() []string { return b.cols }

// Bind checks e against sc: a column that does not exist, a type that
// cannot be compared, or a literal that is not a value of its column's
// type is an error that names the column (wrapping ErrInvalid).
func Bind(e *Expr, sc *arrow.Schema) (*Bound, error) {
	if e == nil {
		return nil, nil
	}
	if err := e.check(); err != nil {
		return nil, err
	}
	root, err := bindNode(e, sc)
	if err != nil {
		return nil, err
	}
	return &Bound{expr: e, root: root, cols: e.Columns()}, nil
}

func bindNode(e *Expr, sc *arrow.Schema) (*node, error) {
	n := &node{op: e.Op, col: e.Col}
	if !e.Op.leaf() {
		for _, a := range e.Args {
			k, err := bindNode(a, sc)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, k)
		}
		return n, nil
	}
	idx := sc.FieldIndices(e.Col)
	switch len(idx) {
	case 0:
		return nil, fmt.Errorf("%w: filter on %q: no such column (the columns are %s)", ErrInvalid, truncate(e.Col), columnList(sc))
	case 1:
	default:
		return nil, fmt.Errorf("%w: filter on %q: the name is ambiguous (%d columns have it)", ErrInvalid, truncate(e.Col), len(idx))
	}
	n.dt = sc.Field(idx[0]).Type
	vt := n.dt
	if d, ok := vt.(*arrow.DictionaryType); ok {
		vt = d.ValueType
	}
	k, ok := kindOf(vt)
	if !ok {
		return nil, fmt.Errorf("%w: filter on %q: its type %s cannot be compared (filters compare numbers, strings, binaries, booleans, decimals, dates, times, timestamps and durations)", ErrInvalid, truncate(e.Col), vt)
	}
	n.kind, n.vt = k, vt
	for _, v := range e.Values {
		x, err := literal(v, vt, k)
		if err != nil {
			return nil, fmt.Errorf("%w: filter on %q (%s): %v", ErrInvalid, truncate(e.Col), vt, err)
		}
		n.vals = append(n.vals, x)
	}
	if e.Op == OpIn && len(n.vals) > 8 {
		n.set = make(map[val]struct{}, len(n.vals))
		for _, v := range n.vals {
			n.set[v] = struct{}{}
		}
	}
	return n, nil
}

func columnList(sc *arrow.Schema) string {
	names := make([]string, 0, sc.NumFields())
	for i, f := range sc.Fields() {
		if i == 20 {
			names = append(names, "…")
			break
		}
		names = append(names, strconv.Quote(truncate(f.Name)))
	}
	return strings.Join(names, ", ")
}

func kindOf(dt arrow.DataType) (colKind, bool) {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.DATE32, arrow.DATE64,
		arrow.TIME32, arrow.TIME64, arrow.TIMESTAMP, arrow.DURATION:
		return kInt, true
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return kUint, true
	case arrow.FLOAT32, arrow.FLOAT64:
		return kFloat, true
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW, arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
		return kString, true
	case arrow.BOOL:
		return kBool, true
	case arrow.DECIMAL128:
		return kDecimal, true
	}
	return 0, false
}

func describe(v Value) string {
	switch v.Kind {
	case KindNumber:
		return "the number " + truncate(v.Text)
	case KindString:
		return "the string " + strconv.Quote(truncate(v.Text))
	case KindBool:
		return "the boolean " + strconv.FormatBool(v.Bool)
	case KindDate:
		return "the date " + v.text()
	case KindTimestamp:
		return "the timestamp " + v.text()
	case KindTime:
		return "the time " + v.text()
	}
	return "a value"
}

// literal converts v to a value of the column type dt, exactly.
func literal(v Value, dt arrow.DataType, k colKind) (val, error) {
	wrong := func() (val, error) {
		return val{}, fmt.Errorf("%s is not a %s value", describe(v), dt)
	}
	switch k {
	case kString:
		if v.Kind != KindString {
			return wrong()
		}
		return val{s: v.Text}, nil
	case kBool:
		if v.Kind != KindBool {
			return wrong()
		}
		return val{b: v.Bool}, nil
	case kFloat:
		if v.Kind != KindNumber {
			return wrong()
		}
		f, err := strconv.ParseFloat(v.Text, 64)
		if err != nil {
			return val{}, fmt.Errorf("%s is out of range", describe(v))
		}
		// A float32 column is compared in float64, the literal as given:
		// pyarrow's compute and dataset filters promote both sides so
		// (x = 0.1 does not match the float32 nearest 0.1, which is
		// 0.10000000149…); DuckDB and polars cast the literal instead.
		return val{f: f}, nil
	case kUint:
		if v.Kind != KindNumber {
			return wrong()
		}
		u, err := parseInteger(v.Text, true)
		if err != nil {
			return val{}, fmt.Errorf("%s: %v", describe(v), err)
		}
		// A value beyond a narrow column's range is compared in uint64
		// (x = 300 on a uint8 column matches nothing): in a read of several
		// profiles the column may be wider in another.
		return u, nil
	case kDecimal:
		if v.Kind != KindNumber && v.Kind != KindString {
			return wrong()
		}
		return decimalLiteral(v, dt.(*arrow.Decimal128Type))
	case kInt:
		return intLiteral(v, dt)
	}
	return wrong()
}

// parseInteger parses an integer literal (an integral number in any
// notation: 100, 1e2, 100.0).
func parseInteger(s string, unsigned bool) (val, error) {
	if unsigned {
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return val{u: u}, nil
		}
	} else if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return val{i: i}, nil
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return val{}, fmt.Errorf("not a number")
	}
	if !r.IsInt() {
		return val{}, fmt.Errorf("not an integer")
	}
	n := r.Num()
	if unsigned {
		if n.Sign() < 0 || !n.IsUint64() {
			return val{}, fmt.Errorf("out of range")
		}
		return val{u: n.Uint64()}, nil
	}
	if !n.IsInt64() {
		return val{}, fmt.Errorf("out of range")
	}
	return val{i: n.Int64()}, nil
}

func decimalLiteral(v Value, dt *arrow.Decimal128Type) (val, error) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(v.Text))
	if !ok {
		return val{}, fmt.Errorf("%s is not a decimal number", describe(v))
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(dt.Scale)), nil)))
	if !r.IsInt() {
		return val{}, fmt.Errorf("%s has more decimal places than the column's scale %d", describe(v), dt.Scale)
	}
	n := r.Num()
	if n.BitLen() > 126 {
		return val{}, fmt.Errorf("%s is out of the range of %s", describe(v), dt)
	}
	return val{d: decimal128.FromBigInt(n)}, nil
}

// intLiteral converts a literal for an integer or temporal column: numbers
// are the column's own values (days, ticks); strings, dates, times and
// timestamps are converted exactly to the column's unit.
func intLiteral(v Value, dt arrow.DataType) (val, error) {
	wrong := func() (val, error) {
		return val{}, fmt.Errorf("%s is not a %s value", describe(v), dt)
	}
	if v.Kind == KindNumber {
		x, err := parseInteger(v.Text, false)
		if err != nil {
			return val{}, fmt.Errorf("%s: %v", describe(v), err)
		}
		// Compared in int64, as for unsigned columns above.
		return x, nil
	}
	switch t := dt.(type) {
	case *arrow.Date32Type, *arrow.Date64Type:
		var days int64
		switch v.Kind {
		case KindDate:
			days = v.Int
		case KindString:
			d, err := time.Parse("2006-01-02", strings.TrimSpace(v.Text))
			if err != nil {
				return val{}, fmt.Errorf("%s is not a date (want YYYY-MM-DD)", describe(v))
			}
			days = d.Unix() / 86400
		default:
			return wrong()
		}
		if dt.ID() == arrow.DATE64 {
			return val{i: days * 86400000}, nil
		}
		if days < math.MinInt32 || days > math.MaxInt32 {
			return val{}, fmt.Errorf("%s is out of the range of %s", describe(v), dt)
		}
		return val{i: days}, nil
	case *arrow.TimestampType:
		var ns *big.Int
		switch v.Kind {
		case KindDate:
			ns = new(big.Int).Mul(big.NewInt(v.Int), big.NewInt(86400e9))
		case KindTimestamp:
			ns = new(big.Int).Mul(big.NewInt(v.Int), big.NewInt(unitNanos(v.Unit)))
		case KindString:
			tm, err := parseTimestamp(v.Text)
			if err != nil {
				return val{}, fmt.Errorf("%s is not a timestamp (want ISO 8601, e.g. 2024-01-31T12:00:00Z)", describe(v))
			}
			ns = new(big.Int).Mul(big.NewInt(tm.Unix()), big.NewInt(1e9))
			ns.Add(ns, big.NewInt(int64(tm.Nanosecond())))
		default:
			return wrong()
		}
		return ticks(ns, t.Unit, v, dt)
	case *arrow.Time32Type, *arrow.Time64Type:
		unit := t.(arrow.TemporalWithUnit).TimeUnit()
		var ns *big.Int
		switch v.Kind {
		case KindTime:
			ns = new(big.Int).Mul(big.NewInt(v.Int), big.NewInt(unitNanos(v.Unit)))
		case KindString:
			tm, err := time.Parse("15:04:05.999999999", strings.TrimSpace(v.Text))
			if err != nil {
				return val{}, fmt.Errorf("%s is not a time of day (want HH:MM:SS[.fraction])", describe(v))
			}
			ns = big.NewInt(int64(tm.Hour())*3600e9 + int64(tm.Minute())*60e9 + int64(tm.Second())*1e9 + int64(tm.Nanosecond()))
		default:
			return wrong()
		}
		return ticks(ns, unit, v, dt)
	}
	return wrong()
}

func ticks(ns *big.Int, unit arrow.TimeUnit, v Value, dt arrow.DataType) (val, error) {
	q, r := new(big.Int).QuoRem(ns, big.NewInt(unitNanos(unit)), new(big.Int))
	if r.Sign() != 0 {
		return val{}, fmt.Errorf("%s is finer than the column's unit (%s)", describe(v), unit)
	}
	if !q.IsInt64() {
		return val{}, fmt.Errorf("%s is out of the range of %s", describe(v), dt)
	}
	i := q.Int64()
	if bits := dt.(arrow.FixedWidthDataType).BitWidth(); bits == 32 && (i < math.MinInt32 || i > math.MaxInt32) {
		return val{}, fmt.Errorf("%s is out of the range of %s", describe(v), dt)
	}
	return val{i: i}, nil
}

func unitNanos(u arrow.TimeUnit) int64 {
	switch u {
	case arrow.Second:
		return 1e9
	case arrow.Millisecond:
		return 1e6
	case arrow.Microsecond:
		return 1e3
	}
	return 1
}

// parseTimestamp reads an ISO 8601 date or date-time; one without a zone
// is UTC.
func parseTimestamp(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{
		time.RFC3339Nano,
		"2006-01-02T15:04:05.999999999",
		"2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02 15:04:05.999999999",
		"2006-01-02T15:04Z07:00",
		"2006-01-02T15:04",
		"2006-01-02",
	} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("not a timestamp")
}
