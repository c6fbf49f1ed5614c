// Package filter is Quiver's row filter: an expression over a profile's
// columns (comparisons with literals, in, is_null/not_null, and/or/not),
// parsed from the JSON form of tickets, from a Substrait
// ExtendedExpression (what pyarrow.substrait.serialize_expressions
// writes) or from the CLI's --where text, bound to a schema, then used to
// prune partitions and row groups (Bound.Possible) and to filter the rows
// that remain (Bound.Apply).
//
// Semantics are SQL's (and pyarrow's): a comparison with a null value is
// null, and/or/not follow Kleene logic, and a row is kept only when the
// filter is true for it (null drops the row). NaN compares false with
// everything, except that NaN != x is true.
package filter

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiverdb/quiver/store/codec"
)

// ErrInvalid marks a filter that is malformed or does not fit the schema
// it is bound to (the codec's sentinel, so the store and the server map it
// to InvalidArgument).
var ErrInvalid = codec.ErrInvalid

// Op is a filter operator.
type Op string

// The operators.
const (
	OpAnd     Op = "and"
	OpOr      Op = "or"
	OpNot     Op = "not"
	OpEq      Op = "="
	OpNe      Op = "!="
	OpLt      Op = "<"
	OpLe      Op = "<="
	OpGt      Op = ">"
	OpGe      Op = ">="
	OpIn      Op = "in"
	OpIsNull  Op = "is_null"
	OpNotNull Op = "not_null"
)

// comparison reports whether op compares a column with one value.
func (op Op) comparison() bool {
	switch op {
	case OpEq, OpNe, OpLt, OpLe, OpGt, OpGe:
		return true
	}
	return false
}

// leaf reports whether op applies to a column (not to other expressions).
func (op Op) leaf() bool { return op.comparison() || op == OpIn || op == OpIsNull || op == OpNotNull }

// MaxDepth bounds the nesting of a filter, and MaxNodes its size: a
// filter is client bytes.
const (
	MaxDepth = 64
	MaxNodes = 1000
	// MaxValues bounds the values of one "in" list (one term; looked up
	// in a set).
	MaxValues = 10000
)

// Expr is a parsed filter, not yet checked against a schema.
type Expr struct {
	Op Op
	// Args are the operands of and, or (two or more) and not (one).
	Args []*Expr
	// Col is the column of a leaf.
	Col string
	// Values are the literal of a comparison (one) or the list of in (one
	// or more).
	Values []Value
}

// Kind is the kind of a literal.
type Kind uint8

// The kinds of literals. Numbers keep their text, so that a number is read
// exactly as the column's type (an int64 beyond 2^53, a decimal).
const (
	KindNumber Kind = iota + 1
	KindString
	KindBool
	// KindDate is a date (Int days since the epoch).
	KindDate
	// KindTimestamp is an instant (Int ticks of Unit since the epoch, UTC).
	KindTimestamp
	// KindTime is a time of day (Int ticks of Unit since midnight).
	KindTime
)

// Value is a literal.
type Value struct {
	Kind Kind
	// Text is a number's text or a string.
	Text string
	Bool bool
	Int  int64
	Unit arrow.TimeUnit
}

// Columns lists the columns e refers to, sorted, each once.
func (e *Expr) Columns() []string {
	var out []string
	var walk func(*Expr)
	walk = func(x *Expr) {
		if x.Op.leaf() {
			out = append(out, x.Col)
		}
		for _, a := range x.Args {
			walk(a)
		}
	}
	walk(e)
	slices.Sort(out)
	return slices.Compact(out)
}

// String renders e in the CLI's --where syntax.
func (e *Expr) String() string {
	var b strings.Builder
	e.write(&b, 0)
	return b.String()
}

func (e *Expr) write(b *strings.Builder, parent int) {
	prec := map[Op]int{OpOr: 1, OpAnd: 2, OpNot: 3}[e.Op]
	if prec != 0 && prec < parent {
		b.WriteByte('(')
		defer b.WriteByte(')')
	}
	switch e.Op {
	case OpAnd, OpOr:
		for i, a := range e.Args {
			if i > 0 {
				b.WriteString(" " + string(e.Op) + " ")
			}
			a.write(b, prec+1)
		}
	case OpNot:
		b.WriteString("not ")
		e.Args[0].write(b, prec)
	case OpIsNull:
		b.WriteString(quoteIdent(e.Col) + " is null")
	case OpNotNull:
		b.WriteString(quoteIdent(e.Col) + " is not null")
	case OpIn:
		b.WriteString(quoteIdent(e.Col) + " in (")
		for i, v := range e.Values {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(v.String())
		}
		b.WriteByte(')')
	default:
		b.WriteString(quoteIdent(e.Col) + " " + string(e.Op) + " " + e.Values[0].String())
	}
}

// String renders a literal as the --where syntax writes it.
func (v Value) String() string {
	switch v.Kind {
	case KindNumber:
		return v.Text
	case KindBool:
		if v.Bool {
			return "true"
		}
		return "false"
	case KindString:
		return "'" + strings.ReplaceAll(v.Text, "'", "''") + "'"
	}
	return "'" + v.text() + "'"
}

func quoteIdent(s string) string {
	if isIdent(s) && !keyword(s) {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// check validates the shape of an expression built by a parser: operand
// counts, a column on every leaf, values where they belong, the depth and
// size bounds.
func (e *Expr) check() error {
	nodes := 0
	var walk func(x *Expr, depth int) error
	walk = func(x *Expr, depth int) error {
		nodes++
		if nodes > MaxNodes {
			return fmt.Errorf("%w: filter has more than %d terms", ErrInvalid, MaxNodes)
		}
		if depth > MaxDepth {
			return fmt.Errorf("%w: filter is nested deeper than %d levels", ErrInvalid, MaxDepth)
		}
		switch {
		case x.Op == OpAnd || x.Op == OpOr:
			if len(x.Args) == 0 {
				return fmt.Errorf("%w: filter %q has no operands", ErrInvalid, x.Op)
			}
		case x.Op == OpNot:
			if len(x.Args) != 1 {
				return fmt.Errorf("%w: filter \"not\" takes one operand", ErrInvalid)
			}
		case x.Op.leaf():
			if x.Col == "" {
				return fmt.Errorf("%w: filter term %q has no column", ErrInvalid, x.Op)
			}
			switch {
			case x.Op == OpIn && len(x.Values) == 0:
				return fmt.Errorf("%w: filter on %q: \"in\" wants a non-empty list of values", ErrInvalid, x.Col)
			case x.Op == OpIn && len(x.Values) > MaxValues:
				// (every parser's lists, Substrait's included: a ticket
				// carries the filter in JSON, which must parse again)
				return fmt.Errorf("%w: filter on %q: more than %d values", ErrInvalid, truncate(x.Col), MaxValues)
			case x.Op.comparison() && len(x.Values) != 1:
				return fmt.Errorf("%w: filter on %q: %q wants one value", ErrInvalid, x.Col, x.Op)
			case (x.Op == OpIsNull || x.Op == OpNotNull) && len(x.Values) != 0:
				return fmt.Errorf("%w: filter on %q: %q takes no value", ErrInvalid, x.Col, x.Op)
			}
			return nil
		default:
			return fmt.Errorf("%w: unknown filter operator %q", ErrInvalid, truncate(string(x.Op)))
		}
		for _, a := range x.Args {
			if a == nil {
				return fmt.Errorf("%w: filter %q has an empty operand", ErrInvalid, x.Op)
			}
			if err := walk(a, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(e, 1)
}

// And joins filters with and (nil ones left out; nil when all are nil).
func And(es ...*Expr) *Expr {
	var args []*Expr
	for _, e := range es {
		if e != nil {
			args = append(args, e)
		}
	}
	switch len(args) {
	case 0:
		return nil
	case 1:
		return args[0]
	}
	return &Expr{Op: OpAnd, Args: args}
}

func truncate(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

var errNotFilter = errors.New("not a filter")
