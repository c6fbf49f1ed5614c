package filter

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ParseWhere parses the CLI's --where text:
//
//	region = 'eu' and total > 100
//	not (status in ('done', 'failed')) or note is null
//	"odd name" >= 2.5
//
// Columns are bare names or "double-quoted"; strings are 'single-quoted'
// (” is a quote); numbers, true and false are bare; any other bare word
// on the right of an operator is a string (region=eu). Operators: = (==),
// != (<>), <, <=, >, >=, in (...), not in (...), is null, is not null;
// and, or, not, parentheses. Keywords are case-insensitive. Errors wrap
// ErrInvalid.
func ParseWhere(s string) (*Expr, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: filter is not valid UTF-8", ErrInvalid)
	}
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &whereParser{toks: toks}
	if len(toks) == 0 {
		return nil, fmt.Errorf("%w: empty filter", ErrInvalid)
	}
	e, err := p.or(1)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, fmt.Errorf("%w: filter %q: unexpected %s", ErrInvalid, truncate(s), p.toks[p.pos])
	}
	if err := e.check(); err != nil {
		return nil, err
	}
	return e, nil
}

type tokKind uint8

const (
	tWord   tokKind = iota + 1 // a bare word: name, keyword, number, true/false
	tIdent                     // a "quoted" name
	tString                    // a 'quoted' string
	tOp                        // = != < <= > >= ( ) ,
)

type token struct {
	kind tokKind
	text string
}

func (t token) String() string {
	switch t.kind {
	case tString:
		return "'" + truncate(t.text) + "'"
	case tIdent:
		return `"` + truncate(t.text) + `"`
	}
	return fmt.Sprintf("%q", truncate(t.text))
}

func (t token) is(kw string) bool { return t.kind == tWord && strings.EqualFold(t.text, kw) }

func lex(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\'' || c == '"':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(s) {
					return nil, fmt.Errorf("%w: filter %q: unterminated %c", ErrInvalid, truncate(s), c)
				}
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c {
						b.WriteByte(c)
						j += 2
						continue
					}
					break
				}
				b.WriteByte(s[j])
				j++
			}
			k := tString
			if c == '"' {
				k = tIdent
			}
			out = append(out, token{kind: k, text: b.String()})
			i = j + 1
		case c == '(' || c == ')' || c == ',':
			out = append(out, token{kind: tOp, text: string(c)})
			i++
		case c == '=' || c == '!' || c == '<' || c == '>':
			j := i + 1
			if j < len(s) && (s[j] == '=' || (c == '<' && s[j] == '>')) {
				j++
			}
			op := s[i:j]
			switch op {
			case "==":
				op = "="
			case "<>":
				op = "!="
			case "!":
				return nil, fmt.Errorf("%w: filter %q: \"!\" (want != or not)", ErrInvalid, truncate(s))
			}
			out = append(out, token{kind: tOp, text: op})
			i = j
		default:
			j := i
			for j < len(s) {
				r, n := utf8.DecodeRuneInString(s[j:])
				if unicode.IsSpace(r) || strings.ContainsRune("()',=!<>\"", r) {
					break
				}
				j += n
			}
			if j == i {
				return nil, fmt.Errorf("%w: filter %q: unexpected %q", ErrInvalid, truncate(s), s[i:i+1])
			}
			out = append(out, token{kind: tWord, text: s[i:j]})
			i = j
		}
		if len(out) > 4*MaxNodes+2*MaxValues {
			return nil, fmt.Errorf("%w: filter has more than %d terms", ErrInvalid, MaxNodes)
		}
	}
	return out, nil
}

type whereParser struct {
	toks []token
	pos  int
}

func (p *whereParser) peek() (token, bool) {
	if p.pos < len(p.toks) {
		return p.toks[p.pos], true
	}
	return token{}, false
}

func (p *whereParser) next() (token, error) {
	t, ok := p.peek()
	if !ok {
		return token{}, fmt.Errorf("%w: filter ends too early", ErrInvalid)
	}
	p.pos++
	return t, nil
}

func (p *whereParser) deep(depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("%w: filter is nested deeper than %d levels", ErrInvalid, MaxDepth)
	}
	return nil
}

func (p *whereParser) or(depth int) (*Expr, error) {
	if err := p.deep(depth); err != nil {
		return nil, err
	}
	return p.chain(depth, OpOr, p.and)
}

func (p *whereParser) and(depth int) (*Expr, error) { return p.chain(depth, OpAnd, p.not) }

func (p *whereParser) chain(depth int, op Op, sub func(int) (*Expr, error)) (*Expr, error) {
	first, err := sub(depth)
	if err != nil {
		return nil, err
	}
	args := []*Expr{first}
	for {
		t, ok := p.peek()
		if !ok || !t.is(string(op)) {
			break
		}
		p.pos++
		a, err := sub(depth)
		if err != nil {
			return nil, err
		}
		args = append(args, a)
		if len(args) > MaxNodes {
			return nil, fmt.Errorf("%w: filter has more than %d terms", ErrInvalid, MaxNodes)
		}
	}
	if len(args) == 1 {
		return first, nil
	}
	return &Expr{Op: op, Args: args}, nil
}

func (p *whereParser) not(depth int) (*Expr, error) {
	if err := p.deep(depth); err != nil {
		return nil, err
	}
	t, ok := p.peek()
	if ok && t.is("not") {
		p.pos++
		a, err := p.not(depth + 1)
		if err != nil {
			return nil, err
		}
		return &Expr{Op: OpNot, Args: []*Expr{a}}, nil
	}
	return p.primary(depth)
}

func (p *whereParser) primary(depth int) (*Expr, error) {
	t, err := p.next()
	if err != nil {
		return nil, err
	}
	if t.kind == tOp && t.text == "(" {
		e, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if c, err := p.next(); err != nil || c.kind != tOp || c.text != ")" {
			return nil, fmt.Errorf("%w: filter: missing \")\"", ErrInvalid)
		}
		return e, nil
	}
	if t.kind != tIdent && (t.kind != tWord || keyword(t.text)) {
		return nil, fmt.Errorf("%w: filter: expected a column name, found %s", ErrInvalid, t)
	}
	col := t.text
	op, err := p.next()
	if err != nil {
		return nil, fmt.Errorf("%w: filter: %q needs an operator (= != < <= > >= in, is null)", ErrInvalid, truncate(col))
	}
	switch {
	case op.is("is"):
		neg := false
		n, err := p.next()
		if err == nil && n.is("not") {
			neg = true
			n, err = p.next()
		}
		if err != nil || !n.is("null") {
			return nil, fmt.Errorf("%w: filter on %q: want \"is null\" or \"is not null\"", ErrInvalid, truncate(col))
		}
		if neg {
			return &Expr{Op: OpNotNull, Col: col}, nil
		}
		return &Expr{Op: OpIsNull, Col: col}, nil
	case op.is("in"):
		return p.in(col)
	case op.is("not"):
		if n, err := p.next(); err != nil || !n.is("in") {
			return nil, fmt.Errorf("%w: filter on %q: want \"not in (...)\"", ErrInvalid, truncate(col))
		}
		e, err := p.in(col)
		if err != nil {
			return nil, err
		}
		return &Expr{Op: OpNot, Args: []*Expr{e}}, nil
	case op.kind == tOp && op.text != "(" && op.text != ")" && op.text != ",":
		v, err := p.literal(col)
		if err != nil {
			return nil, err
		}
		return &Expr{Op: Op(op.text), Col: col, Values: []Value{v}}, nil
	}
	return nil, fmt.Errorf("%w: filter on %q: unexpected %s (want = != < <= > >= in, is null)", ErrInvalid, truncate(col), op)
}

func (p *whereParser) in(col string) (*Expr, error) {
	if t, err := p.next(); err != nil || t.kind != tOp || t.text != "(" {
		return nil, fmt.Errorf("%w: filter on %q: \"in\" wants a list such as ('a', 'b')", ErrInvalid, truncate(col))
	}
	e := &Expr{Op: OpIn, Col: col}
	for {
		v, err := p.literal(col)
		if err != nil {
			return nil, err
		}
		e.Values = append(e.Values, v)
		if len(e.Values) > MaxValues {
			return nil, fmt.Errorf("%w: filter on %q: more than %d values", ErrInvalid, truncate(col), MaxValues)
		}
		t, err := p.next()
		if err != nil || t.kind != tOp || (t.text != "," && t.text != ")") {
			return nil, fmt.Errorf("%w: filter on %q: unterminated list (want \",\" or \")\")", ErrInvalid, truncate(col))
		}
		if t.text == ")" {
			return e, nil
		}
	}
}

func (p *whereParser) literal(col string) (Value, error) {
	t, err := p.next()
	if err != nil {
		return Value{}, fmt.Errorf("%w: filter on %q: missing value", ErrInvalid, truncate(col))
	}
	switch {
	case t.kind == tString:
		return Value{Kind: KindString, Text: t.text}, nil
	case t.kind == tWord && (t.is("true") || t.is("false")):
		return Value{Kind: KindBool, Bool: t.is("true")}, nil
	case t.kind == tWord && t.is("null"):
		return Value{}, fmt.Errorf("%w: filter on %q: a comparison with null selects nothing; use \"is null\"", ErrInvalid, truncate(col))
	case t.kind == tWord && isNumber(t.text):
		return Value{Kind: KindNumber, Text: normNumber(t.text)}, nil
	case t.kind == tWord && !keyword(t.text):
		return Value{Kind: KindString, Text: t.text}, nil
	}
	return Value{}, fmt.Errorf("%w: filter on %q: expected a value, found %s", ErrInvalid, truncate(col), t)
}

// keyword reports whether a bare word is one of the syntax's words.
func keyword(s string) bool {
	switch strings.ToLower(s) {
	case "and", "or", "not", "in", "is", "null", "true", "false":
		return true
	}
	return false
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || unicode.IsLetter(r) || (i > 0 && (unicode.IsDigit(r) || r == '.' || r == '-'))) {
			return false
		}
	}
	return true
}

// isNumber matches JSON-like numbers: -?digits(.digits)?([eE][+-]?digits)?
// (a leading + or a bare ".5" too).
func isNumber(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		if n == 0 {
			return false
		}
	}
	return i == len(s)
}

// normNumber writes a number isNumber accepts as JSON writes numbers: no
// leading +, a digit on both sides of the point.
func normNumber(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	mant = strings.TrimSuffix(mant, ".")
	whole, frac, hasFrac := strings.Cut(mant, ".")
	if whole = strings.TrimLeft(whole, "0"); whole == "" {
		whole = "0" // JSON: no leading zeros, a digit before the point
	}
	mant = whole
	if hasFrac {
		mant += "." + frac
	}
	if hasExp {
		mant += "e" + strings.TrimPrefix(exp, "+")
	}
	if neg {
		return "-" + mant
	}
	return mant
}
