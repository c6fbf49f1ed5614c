package filter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// ParseJSON parses the JSON form of a filter:
//
//	{"col": "region", "op": "=", "value": "eu"}
//	{"col": "region", "op": "in", "value": ["eu", "us"]}
//	{"col": "total", "op": "is_null"}
//	{"and": [f, f, ...]}, {"or": [f, f, ...]}, {"not": f}
//
// with the ops = != < <= > >= in is_null not_null. Values are JSON
// strings, numbers and booleans; dates, times and timestamps are ISO 8601
// strings (or numbers in the column's unit). Unknown or repeated keys are
// refused. Errors wrap ErrInvalid.
func ParseJSON(b []byte) (*Expr, error) {
	p := &jsonParser{}
	e, err := p.node(bytes.TrimSpace(b), 1)
	if err != nil {
		return nil, err
	}
	if err := e.check(); err != nil {
		return nil, err
	}
	return e, nil
}

type jsonParser struct{ nodes int }

// fields reads one JSON object, its keys in order, refusing a repeated
// key and anything after the object.
func fields(b []byte) ([]string, map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	t, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if t != json.Delim('{') {
		return nil, nil, errNotFilter
	}
	var keys []string
	vals := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		if _, dup := vals[k]; dup {
			return nil, nil, fmt.Errorf("key %q given twice", truncate(k))
		}
		keys = append(keys, k)
		vals[k] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, fmt.Errorf("trailing data after the object")
	}
	return keys, vals, nil
}

func (p *jsonParser) node(b []byte, depth int) (*Expr, error) {
	p.nodes++
	if p.nodes > MaxNodes {
		return nil, fmt.Errorf("%w: filter has more than %d terms", ErrInvalid, MaxNodes)
	}
	if depth > MaxDepth {
		return nil, fmt.Errorf("%w: filter is nested deeper than %d levels", ErrInvalid, MaxDepth)
	}
	keys, vals, err := fields(b)
	if err == errNotFilter {
		return nil, fmt.Errorf("%w: filter term %s: want an object such as {\"col\": \"x\", \"op\": \"=\", \"value\": 1} or {\"and\": [...]}", ErrInvalid, truncate(string(b)))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: filter: %v", ErrInvalid, truncate(err.Error()))
	}
	if len(keys) == 1 {
		switch Op(keys[0]) {
		case OpAnd, OpOr:
			var raw []json.RawMessage
			if err := json.Unmarshal(vals[keys[0]], &raw); err != nil {
				return nil, fmt.Errorf("%w: filter %q wants a list of filters", ErrInvalid, keys[0])
			}
			if len(raw) == 0 {
				return nil, fmt.Errorf("%w: filter %q has an empty list", ErrInvalid, keys[0])
			}
			e := &Expr{Op: Op(keys[0])}
			for _, r := range raw {
				a, err := p.node(r, depth+1)
				if err != nil {
					return nil, err
				}
				e.Args = append(e.Args, a)
			}
			return e, nil
		case OpNot:
			a, err := p.node(vals[keys[0]], depth+1)
			if err != nil {
				return nil, err
			}
			return &Expr{Op: OpNot, Args: []*Expr{a}}, nil
		}
	}
	for _, k := range keys {
		switch k {
		case "col", "op", "value":
		case "and", "or", "not":
			return nil, fmt.Errorf("%w: filter term with %q must have no other keys", ErrInvalid, k)
		default:
			return nil, fmt.Errorf("%w: filter term has unknown key %q (want col, op, value; or and, or, not)", ErrInvalid, truncate(k))
		}
	}
	var col, op string
	if err := json.Unmarshal(vals["col"], &col); err != nil || col == "" {
		return nil, fmt.Errorf("%w: filter term %s: \"col\" must name a column", ErrInvalid, truncate(string(b)))
	}
	if err := json.Unmarshal(vals["op"], &op); err != nil {
		return nil, fmt.Errorf("%w: filter on %q: \"op\" must be one of = != < <= > >= in is_null not_null", ErrInvalid, truncate(col))
	}
	e := &Expr{Op: Op(strings.ToLower(op)), Col: col}
	if e.Op == "==" {
		e.Op = OpEq
	}
	if !e.Op.leaf() {
		return nil, fmt.Errorf("%w: filter on %q: op %q (want = != < <= > >= in is_null not_null)", ErrInvalid, truncate(col), truncate(op))
	}
	raw, has := vals["value"]
	switch {
	case e.Op == OpIsNull || e.Op == OpNotNull:
		if has {
			return nil, fmt.Errorf("%w: filter on %q: %q takes no value", ErrInvalid, truncate(col), e.Op)
		}
		return e, nil
	case !has:
		return nil, fmt.Errorf("%w: filter on %q: %q needs a \"value\"", ErrInvalid, truncate(col), e.Op)
	case e.Op == OpIn:
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
			return nil, fmt.Errorf("%w: filter on %q: \"in\" wants a non-empty list of values", ErrInvalid, truncate(col))
		}
		if len(list) > MaxValues {
			return nil, fmt.Errorf("%w: filter on %q: more than %d values", ErrInvalid, truncate(col), MaxValues)
		}
		for _, r := range list {
			v, err := jsonValue(r, col)
			if err != nil {
				return nil, err
			}
			e.Values = append(e.Values, v)
		}
	default:
		v, err := jsonValue(raw, col)
		if err != nil {
			return nil, err
		}
		e.Values = []Value{v}
	}
	return e, nil
}

func jsonValue(b json.RawMessage, col string) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Value{}, fmt.Errorf("%w: filter on %q: bad value: %v", ErrInvalid, truncate(col), err)
	}
	switch x := v.(type) {
	case string:
		if !utf8.ValidString(x) {
			return Value{}, fmt.Errorf("%w: filter on %q: value is not valid UTF-8", ErrInvalid, truncate(col))
		}
		return Value{Kind: KindString, Text: x}, nil
	case json.Number:
		return Value{Kind: KindNumber, Text: x.String()}, nil
	case bool:
		return Value{Kind: KindBool, Bool: x}, nil
	case nil:
		return Value{}, fmt.Errorf("%w: filter on %q: a null value compares as unknown and selects nothing; use op \"is_null\" or \"not_null\"", ErrInvalid, truncate(col))
	}
	return Value{}, fmt.Errorf("%w: filter on %q: value %s: want a string, number or boolean", ErrInvalid, truncate(col), truncate(string(b)))
}

// MarshalJSON writes the JSON form ParseJSON reads back to the same
// filter (dates, times and timestamps as ISO 8601 strings).
func (e *Expr) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	e.writeJSON(&b)
	return b.Bytes(), nil
}

func (e *Expr) writeJSON(b *bytes.Buffer) {
	str := func(s string) {
		j, _ := json.Marshal(s)
		b.Write(j)
	}
	switch e.Op {
	case OpAnd, OpOr:
		b.WriteString(`{"` + string(e.Op) + `":[`)
		for i, a := range e.Args {
			if i > 0 {
				b.WriteByte(',')
			}
			a.writeJSON(b)
		}
		b.WriteString("]}")
		return
	case OpNot:
		b.WriteString(`{"not":`)
		e.Args[0].writeJSON(b)
		b.WriteByte('}')
		return
	}
	b.WriteString(`{"col":`)
	str(e.Col)
	b.WriteString(`,"op":`)
	str(string(e.Op))
	if len(e.Values) > 0 {
		b.WriteString(`,"value":`)
		if e.Op == OpIn {
			b.WriteByte('[')
		}
		for i, v := range e.Values {
			if i > 0 {
				b.WriteByte(',')
			}
			switch v.Kind {
			case KindNumber:
				b.WriteString(v.Text)
			case KindBool:
				if v.Bool {
					b.WriteString("true")
				} else {
					b.WriteString("false")
				}
			default:
				str(v.text())
			}
		}
		if e.Op == OpIn {
			b.WriteByte(']')
		}
	}
	b.WriteByte('}')
}

// text is a string, date, time or timestamp literal as text.
func (v Value) text() string {
	switch v.Kind {
	case KindDate:
		return time.Unix(v.Int*86400, 0).UTC().Format("2006-01-02")
	case KindTimestamp:
		return unitTime(v.Int, v.Unit).UTC().Format("2006-01-02T15:04:05.999999999Z")
	case KindTime:
		t := unitTime(v.Int, v.Unit).UTC()
		return t.Format("15:04:05.999999999")
	}
	return v.Text
}

func unitTime(n int64, u arrow.TimeUnit) time.Time {
	switch u {
	case arrow.Second:
		return time.Unix(n, 0)
	case arrow.Millisecond:
		return time.UnixMilli(n)
	case arrow.Microsecond:
		return time.UnixMicro(n)
	}
	return time.Unix(0, n)
}
