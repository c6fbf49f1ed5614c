package filter

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	pb "github.com/substrait-io/substrait-protobuf/go/substraitpb"
	"google.golang.org/protobuf/proto"
)

// ParseSubstrait parses a Substrait ExtendedExpression (protobuf bytes)
// holding one boolean expression, as pyarrow.substrait.serialize_expressions
// writes for a pyarrow.dataset expression, into a filter. Columns are named
// by the expression's base schema; they are looked up by name when the
// filter is bound, so the base schema need only name them. The functions
// understood are those of Substrait's comparison and boolean extensions
// that the JSON form has (equal, not_equal, lt, lte, gt, gte, is_null,
// is_not_null, and, or, not) and SingularOrList ("is_in"); anything else
// is an error naming it. Errors wrap ErrInvalid.
//
// Function names are resolved by name from the extension declarations;
// the extension URIs (or URNs) are not needed, so the older URI form that
// pyarrow writes and the URN form of newer producers both work.
func ParseSubstrait(b []byte) (*Expr, error) {
	var ee pb.ExtendedExpression
	if err := (proto.UnmarshalOptions{RecursionLimit: 2 * MaxDepth}).Unmarshal(b, &ee); err != nil {
		return nil, fmt.Errorf("%w: filter: not a Substrait ExtendedExpression: %v", ErrInvalid, truncate(err.Error()))
	}
	refs := ee.GetReferredExpr()
	if len(refs) != 1 {
		return nil, fmt.Errorf("%w: filter: the Substrait ExtendedExpression holds %d expressions (want one boolean expression)", ErrInvalid, len(refs))
	}
	root := refs[0].GetExpression()
	if root == nil {
		return nil, fmt.Errorf("%w: filter: the Substrait ExtendedExpression holds a measure, not an expression", ErrInvalid)
	}
	p := &substraitParser{funcs: map[uint32]string{}}
	for _, ext := range ee.GetExtensions() {
		if f := ext.GetExtensionFunction(); f != nil {
			name, _, _ := strings.Cut(f.GetName(), ":") // "gt:any_any" is "gt"
			p.funcs[f.GetFunctionAnchor()] = name
		}
	}
	names, err := topNames(ee.GetBaseSchema())
	if err != nil {
		return nil, err
	}
	p.names = names
	e, err := p.expr(root, 1)
	if err != nil {
		return nil, err
	}
	if err := e.check(); err != nil {
		return nil, err
	}
	return e, nil
}

// topNames are the names of a NamedStruct's top-level fields (its names
// list every struct field depth first, nested ones included).
func topNames(ns *pb.NamedStruct) ([]string, error) {
	if ns == nil || ns.GetStruct() == nil {
		return nil, fmt.Errorf("%w: filter: the Substrait ExtendedExpression has no base schema", ErrInvalid)
	}
	all := ns.GetNames()
	var out []string
	pos := 0
	for _, t := range ns.GetStruct().GetTypes() {
		if pos >= len(all) {
			return nil, fmt.Errorf("%w: filter: the Substrait base schema has fewer names than fields", ErrInvalid)
		}
		out = append(out, all[pos])
		pos += 1 + nestedNames(t, 0)
	}
	return out, nil
}

func nestedNames(t *pb.Type, depth int) int {
	if t == nil || depth > MaxDepth {
		return 0
	}
	switch k := t.GetKind().(type) {
	case *pb.Type_Struct_:
		n := 0
		for _, c := range k.Struct.GetTypes() {
			n += 1 + nestedNames(c, depth+1)
		}
		return n
	case *pb.Type_List_:
		return nestedNames(k.List.GetType(), depth+1)
	case *pb.Type_Map_:
		return nestedNames(k.Map.GetKey(), depth+1) + nestedNames(k.Map.GetValue(), depth+1)
	}
	return 0
}

type substraitParser struct {
	funcs map[uint32]string
	names []string
	nodes int
}

var substraitOps = map[string]Op{
	"equal": OpEq, "not_equal": OpNe, "lt": OpLt, "lte": OpLe, "gt": OpGt, "gte": OpGe,
}

// flipped is the operator with its operands swapped (5 < x is x > 5).
var flipped = map[Op]Op{OpEq: OpEq, OpNe: OpNe, OpLt: OpGt, OpLe: OpGe, OpGt: OpLt, OpGe: OpLe}

func (p *substraitParser) expr(x *pb.Expression, depth int) (*Expr, error) {
	p.nodes++
	if p.nodes > MaxNodes {
		return nil, fmt.Errorf("%w: filter has more than %d terms", ErrInvalid, MaxNodes)
	}
	if depth > MaxDepth {
		return nil, fmt.Errorf("%w: filter is nested deeper than %d levels", ErrInvalid, MaxDepth)
	}
	switch t := x.GetRexType().(type) {
	case *pb.Expression_ScalarFunction_:
		return p.call(t.ScalarFunction, depth)
	case *pb.Expression_SingularOrList_:
		col, err := p.column(t.SingularOrList.GetValue())
		if err != nil {
			return nil, err
		}
		e := &Expr{Op: OpIn, Col: col}
		for _, o := range t.SingularOrList.GetOptions() {
			v, err := p.literal(o, col)
			if err != nil {
				return nil, err
			}
			e.Values = append(e.Values, v)
		}
		if len(e.Values) == 0 {
			return nil, fmt.Errorf("%w: filter on %q: an empty \"in\" list", ErrInvalid, truncate(col))
		}
		return e, nil
	case nil:
		return nil, fmt.Errorf("%w: filter: an empty Substrait expression", ErrInvalid)
	}
	return nil, fmt.Errorf("%w: filter: Substrait %s expressions are not supported (only comparisons of a column with literals, in, is_null, is_not_null, and, or, not)", ErrInvalid, rexName(x))
}

func rexName(x *pb.Expression) string {
	s := fmt.Sprintf("%T", x.GetRexType())
	s = strings.TrimPrefix(s, "*substraitpb.Expression_")
	return strings.TrimSuffix(s, "_")
}

func (p *substraitParser) call(f *pb.Expression_ScalarFunction, depth int) (*Expr, error) {
	name, ok := p.funcs[f.GetFunctionReference()]
	if !ok {
		return nil, fmt.Errorf("%w: filter: Substrait function reference %d is not declared", ErrInvalid, f.GetFunctionReference())
	}
	var args []*pb.Expression
	for _, a := range f.GetArguments() {
		v := a.GetValue()
		if v == nil {
			return nil, fmt.Errorf("%w: filter: Substrait function %q has an argument that is not a value", ErrInvalid, truncate(name))
		}
		args = append(args, v)
	}
	switch name {
	case "and", "or":
		if len(args) == 0 {
			return nil, fmt.Errorf("%w: filter: Substrait %q without arguments", ErrInvalid, name)
		}
		e := &Expr{Op: Op(name)}
		for _, a := range args {
			k, err := p.expr(a, depth+1)
			if err != nil {
				return nil, err
			}
			e.Args = append(e.Args, k)
		}
		if len(e.Args) == 1 {
			return e.Args[0], nil
		}
		return e, nil
	case "not":
		if len(args) != 1 {
			return nil, fmt.Errorf("%w: filter: Substrait \"not\" takes one argument", ErrInvalid)
		}
		k, err := p.expr(args[0], depth+1)
		if err != nil {
			return nil, err
		}
		return &Expr{Op: OpNot, Args: []*Expr{k}}, nil
	case "is_null", "is_not_null":
		if len(args) != 1 {
			return nil, fmt.Errorf("%w: filter: Substrait %q takes one argument", ErrInvalid, name)
		}
		col, err := p.column(args[0])
		if err != nil {
			return nil, err
		}
		op := OpIsNull
		if name == "is_not_null" {
			op = OpNotNull
		}
		return &Expr{Op: op, Col: col}, nil
	}
	op, ok := substraitOps[name]
	if !ok {
		return nil, fmt.Errorf("%w: filter: Substrait function %q is not supported (only equal, not_equal, lt, lte, gt, gte, is_null, is_not_null, and, or, not, and in-lists)", ErrInvalid, truncate(name))
	}
	if len(args) != 2 {
		return nil, fmt.Errorf("%w: filter: Substrait %q takes two arguments", ErrInvalid, name)
	}
	ref, lit := args[0], args[1]
	if _, isLit := ref.GetRexType().(*pb.Expression_Literal_); isLit {
		ref, lit, op = lit, ref, flipped[op]
	}
	col, err := p.column(ref)
	if err != nil {
		return nil, err
	}
	v, err := p.literal(lit, col)
	if err != nil {
		return nil, err
	}
	return &Expr{Op: op, Col: col, Values: []Value{v}}, nil
}

// column resolves a top-level field reference to its name.
func (p *substraitParser) column(x *pb.Expression) (string, error) {
	sel := x.GetSelection()
	if sel == nil {
		return "", fmt.Errorf("%w: filter: Substrait comparisons must compare a column with a literal (found a %s expression where a column was expected)", ErrInvalid, rexName(x))
	}
	seg := sel.GetDirectReference()
	sf := seg.GetStructField()
	if sf == nil || sel.GetRootReference() == nil && sel.GetRootType() != nil {
		return "", fmt.Errorf("%w: filter: only references to top-level columns are supported", ErrInvalid)
	}
	if sf.GetChild() != nil {
		return "", fmt.Errorf("%w: filter: references into nested columns are not supported", ErrInvalid)
	}
	i := int(sf.GetField())
	if i < 0 || i >= len(p.names) {
		return "", fmt.Errorf("%w: filter: Substrait field %d is outside the base schema's %d fields", ErrInvalid, i, len(p.names))
	}
	return p.names[i], nil
}

func (p *substraitParser) literal(x *pb.Expression, col string) (Value, error) {
	v, err := p.literalValue(x, col)
	if err == nil {
		err = temporalInRange(v, col)
	}
	return v, err
}

// temporalInRange refuses dates, times and timestamps that the filter's
// text form (which endpoint tickets carry) cannot give back: times outside
// a day, dates and timestamps outside the years 1 to 9999.
func temporalInRange(v Value, col string) error {
	per := int64(1)
	switch v.Unit {
	case arrow.Millisecond:
		per = 1e3
	case arrow.Microsecond:
		per = 1e6
	case arrow.Nanosecond:
		per = 1e9
	}
	lo, hi := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	ok := true
	switch v.Kind {
	case KindTime:
		ok = v.Int >= 0 && v.Int/per < 86400
	case KindTimestamp:
		ok = v.Int/per >= lo && v.Int/per < hi
	case KindDate:
		ok = v.Int >= lo/86400 && v.Int < hi/86400
	}
	if !ok {
		return fmt.Errorf("%w: filter on %q: a date, time or timestamp literal out of range (%s)", ErrInvalid, truncate(col), v.text())
	}
	return nil
}

func (p *substraitParser) literalValue(x *pb.Expression, col string) (Value, error) {
	lit := x.GetLiteral()
	if lit == nil {
		return Value{}, fmt.Errorf("%w: filter on %q: Substrait comparisons must compare a column with a literal (found a %s expression)", ErrInvalid, truncate(col), rexName(x))
	}
	num := func(s string) (Value, error) { return Value{Kind: KindNumber, Text: s}, nil }
	switch t := lit.GetLiteralType().(type) {
	case *pb.Expression_Literal_Boolean:
		return Value{Kind: KindBool, Bool: t.Boolean}, nil
	case *pb.Expression_Literal_I8:
		return num(strconv.FormatInt(int64(t.I8), 10))
	case *pb.Expression_Literal_I16:
		return num(strconv.FormatInt(int64(t.I16), 10))
	case *pb.Expression_Literal_I32:
		return num(strconv.FormatInt(int64(t.I32), 10))
	case *pb.Expression_Literal_I64:
		return num(strconv.FormatInt(t.I64, 10))
	case *pb.Expression_Literal_Fp32:
		return floatValue(float64(t.Fp32), 32, col)
	case *pb.Expression_Literal_Fp64:
		return floatValue(t.Fp64, 64, col)
	case *pb.Expression_Literal_String_:
		return stringValue(t.String_, col)
	case *pb.Expression_Literal_VarChar_:
		return stringValue(t.VarChar.GetValue(), col)
	case *pb.Expression_Literal_FixedChar:
		return stringValue(t.FixedChar, col)
	case *pb.Expression_Literal_Binary:
		return Value{Kind: KindString, Text: string(t.Binary)}, nil
	case *pb.Expression_Literal_Date:
		return Value{Kind: KindDate, Int: int64(t.Date)}, nil
	case *pb.Expression_Literal_Timestamp:
		//lint:ignore SA1019 pyarrow 26 still writes the deprecated literal forms
		return Value{Kind: KindTimestamp, Int: t.Timestamp, Unit: arrow.Microsecond}, nil
	case *pb.Expression_Literal_TimestampTz:
		//lint:ignore SA1019 pyarrow 26 still writes the deprecated literal forms
		return Value{Kind: KindTimestamp, Int: t.TimestampTz, Unit: arrow.Microsecond}, nil
	case *pb.Expression_Literal_PrecisionTimestamp_:
		return precisionValue(KindTimestamp, t.PrecisionTimestamp.GetPrecision(), t.PrecisionTimestamp.GetValue(), col)
	case *pb.Expression_Literal_PrecisionTimestampTz:
		return precisionValue(KindTimestamp, t.PrecisionTimestampTz.GetPrecision(), t.PrecisionTimestampTz.GetValue(), col)
	case *pb.Expression_Literal_Time:
		//lint:ignore SA1019 pyarrow 26 still writes the deprecated literal forms
		return Value{Kind: KindTime, Int: t.Time, Unit: arrow.Microsecond}, nil
	case *pb.Expression_Literal_PrecisionTime_:
		return precisionValue(KindTime, t.PrecisionTime.GetPrecision(), t.PrecisionTime.GetValue(), col)
	case *pb.Expression_Literal_Decimal_:
		return decimalValue(t.Decimal, col)
	case *pb.Expression_Literal_Null:
		return Value{}, fmt.Errorf("%w: filter on %q: a comparison with null selects nothing; use is_null", ErrInvalid, truncate(col))
	}
	return Value{}, fmt.Errorf("%w: filter on %q: this Substrait literal type is not supported (%T)", ErrInvalid, truncate(col), lit.GetLiteralType())
}

func stringValue(s, col string) (Value, error) {
	if !utf8.ValidString(s) {
		return Value{}, fmt.Errorf("%w: filter on %q: a string literal is not valid UTF-8", ErrInvalid, truncate(col))
	}
	return Value{Kind: KindString, Text: s}, nil
}

func floatValue(f float64, bits int, col string) (Value, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return Value{}, fmt.Errorf("%w: filter on %q: NaN and infinite literals are not supported", ErrInvalid, truncate(col))
	}
	return Value{Kind: KindNumber, Text: strconv.FormatFloat(f, 'g', -1, bits)}, nil
}

func precisionValue(k Kind, precision int32, v int64, col string) (Value, error) {
	var u arrow.TimeUnit
	switch precision {
	case 0:
		u = arrow.Second
	case 3:
		u = arrow.Millisecond
	case 6:
		u = arrow.Microsecond
	case 9:
		u = arrow.Nanosecond
	default:
		return Value{}, fmt.Errorf("%w: filter on %q: a time literal of precision %d (want 0, 3, 6 or 9)", ErrInvalid, truncate(col), precision)
	}
	return Value{Kind: k, Int: v, Unit: u}, nil
}

// decimalValue reads a Substrait decimal literal (16 bytes, little-endian
// two's complement, scaled by 10^scale) as a number's text.
func decimalValue(d *pb.Expression_Literal_Decimal, col string) (Value, error) {
	b := d.GetValue()
	if len(b) != 16 || d.GetScale() < 0 || d.GetScale() > 38 {
		return Value{}, fmt.Errorf("%w: filter on %q: a malformed Substrait decimal literal", ErrInvalid, truncate(col))
	}
	be := make([]byte, 16)
	for i := range b {
		be[15-i] = b[i]
	}
	n := new(big.Int).SetBytes(be)
	if be[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	r := new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.GetScale())), nil))
	return Value{Kind: KindNumber, Text: r.FloatString(int(d.GetScale()))}, nil
}
