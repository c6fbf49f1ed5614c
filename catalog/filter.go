package catalog

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/quiverdb/quiver/store/filter"
)

// filterField is the "filter" of a read request, in either form:
//
//   - the JSON form, an object such as
//     {"and": [{"col": "region", "op": "=", "value": "eu"}, {"col": "total", "op": ">", "value": 100}]}
//     (filter.ParseJSON);
//   - a Substrait ExtendedExpression, base64 in {"substrait": "<base64>"}
//     (what pyarrow.substrait.serialize_expressions writes for a
//     pyarrow.dataset expression; filter.ParseSubstrait).
type filterField struct{ e *filter.Expr }

func (f *filterField) UnmarshalJSON(b []byte) error {
	e, err := ParseFilter(b)
	if err != nil {
		return err
	}
	f.e = e
	return nil
}

// MarshalJSON writes the JSON form (a Substrait filter too).
func (f filterField) MarshalJSON() ([]byte, error) { return f.e.MarshalJSON() }

// ParseFilter parses the "filter" of a read request (either form); errors
// wrap ErrInvalid and store.ErrInvalidArgument.
func ParseFilter(b []byte) (*filter.Expr, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("%w: filter must be a JSON object: {\"col\": …, \"op\": …, \"value\": …}, {\"and\"|\"or\": [...]}, {\"not\": …} or {\"substrait\": \"<base64 ExtendedExpression>\"}", filter.ErrInvalid)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err == nil && len(probe) == 1 {
		if raw, ok := probe["substrait"]; ok {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, fmt.Errorf("%w: filter \"substrait\" must be a base64 string", filter.ErrInvalid)
			}
			pb, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				if pb, err = base64.RawURLEncoding.DecodeString(s); err != nil {
					return nil, fmt.Errorf("%w: filter \"substrait\" is not valid base64", filter.ErrInvalid)
				}
			}
			return filter.ParseSubstrait(pb)
		}
	}
	return filter.ParseJSON(b)
}

// limitField is the "limit" of a read request: a count of rows ≥ 0.
type limitField struct{ n int64 }

func (l *limitField) UnmarshalJSON(b []byte) error {
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	// (A json.Number takes a string holding a number too: "5" was a
	// limit of 5 where 2.0 was refused; red team round 47.)
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '"' {
		return fmt.Errorf("%w: limit %s: want a whole number of rows ≥ 0, not a string", filter.ErrInvalid, truncate(string(b)))
	}
	if err := dec.Decode(&n); err != nil {
		return fmt.Errorf("%w: limit %s: want a whole number of rows ≥ 0", filter.ErrInvalid, truncate(string(b)))
	}
	v, err := n.Int64()
	if err != nil || v < 0 {
		return fmt.Errorf("%w: limit %s: want a whole number of rows ≥ 0", filter.ErrInvalid, truncate(string(b)))
	}
	l.n = v
	return nil
}

func (l limitField) MarshalJSON() ([]byte, error) { return json.Marshal(l.n) }
