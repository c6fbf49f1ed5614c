package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiverdb/quiver/store/codec"
	"github.com/quiverdb/quiver/store/filter"
)

// maxCSVTypesBytes bounds the "csv_types" a planned endpoint's ticket
// carries (the JSON of the object). A CSV version with more or longer
// column names than fit gets tickets without them, read as before with the
// types the version's files give at the read. Plan groups files so that
// each ticket, types included, stays within maxRequestBytes, and leaves
// the types out only when they leave no room for a file (beside a filter
// near the limit).
const maxCSVTypesBytes = 256 << 10

// csvTypesField is the "csv_types" of a ticket: an object of column names
// to CSV type names, {"id": "int64", "note": "string"}. A name given twice,
// a value that is not a string or a type name CSV inference does not give
// is refused here; whether the names are the version's columns, and the
// types fit its files, the store checks.
type csvTypesField struct{ m map[string]string }

func (f *csvTypesField) UnmarshalJSON(b []byte) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: csv_types: "+format, append([]any{filter.ErrInvalid}, a...)...)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return bad("want an object of column names to types (%s)", codec.CSVTypeNames)
	}
	m := map[string]string{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return bad("want an object of column names to types")
		}
		name, _ := t.(string)
		var typ string
		if err := dec.Decode(&typ); err != nil {
			return bad("column %q: want a type name (%s)", truncate(name), codec.CSVTypeNames)
		}
		if _, dup := m[name]; dup {
			return bad("column %q given twice", truncate(name))
		}
		if _, ok := codec.CSVType(typ); !ok {
			return bad("column %q has type %q (want %s)", truncate(name), truncate(typ), codec.CSVTypeNames)
		}
		m[name] = typ
	}
	if _, err := dec.Token(); err != nil {
		return bad("want an object of column names to types")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return bad("trailing data")
	}
	if len(m) == 0 {
		return bad("names no column")
	}
	f.m = m
	return nil
}

// MarshalJSON writes the object, its names in sorted order.
func (f csvTypesField) MarshalJSON() ([]byte, error) { return json.Marshal(f.m) }

// csvTypes are the types of sc, a CSV version's schema, for its planned
// endpoints' tickets (Request.CSVTypes); nil when a ticket cannot carry
// them: a type CSV inference does not give (not a CSV schema), a name that
// is not UTF-8 (a JSON ticket could not name it as it is), or more than
// maxCSVTypesBytes of them.
func csvTypes(sc *arrow.Schema) map[string]string {
	if sc.NumFields() == 0 {
		return nil
	}
	m := make(map[string]string, sc.NumFields())
	for _, f := range sc.Fields() {
		name, ok := codec.CSVTypeName(f.Type)
		if !ok || !utf8.ValidString(f.Name) {
			return nil
		}
		m[f.Name] = name
	}
	if len(m) != sc.NumFields() {
		return nil // a name twice: not a CSV schema
	}
	if b, err := json.Marshal(m); err != nil || len(b) > maxCSVTypesBytes {
		return nil
	}
	return m
}
