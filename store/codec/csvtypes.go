package codec

import (
	"cmp"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// CSV column types by name, as a planned read's ticket carries them
// (DESIGN.md, tickets): the types CSVInference can give, and no other.
var csvTypeNames = []struct {
	name string
	typ  arrow.DataType
}{
	{"int64", arrow.PrimitiveTypes.Int64},
	{"float64", arrow.PrimitiveTypes.Float64},
	{"bool", arrow.FixedWidthTypes.Boolean},
	{"string", arrow.BinaryTypes.String},
}

// CSVTypeNames lists the names CSVType takes, in a message's order.
const CSVTypeNames = `"int64", "float64", "bool" or "string"`

// CSVType is the type a CSV column type name stands for ("int64",
// "float64", "bool", "string": the types CSVInference gives); ok is false
// for any other name.
func CSVType(name string) (t arrow.DataType, ok bool) {
	for _, n := range csvTypeNames {
		if n.name == name {
			return n.typ, true
		}
	}
	return nil, false
}

// CSVTypeName is the name of t, a type CSVInference gives; ok is false
// for any other type.
func CSVTypeName(t arrow.DataType) (name string, ok bool) {
	if t == nil {
		return "", false
	}
	for _, n := range csvTypeNames {
		if arrow.TypeEqual(n.typ, t) {
			return n.name, true
		}
	}
	return "", false
}

// CSVTypeCovers reports whether every value a column CSVInference types
// as from may hold is a value of type to by the inference rule: to is
// from, a string, or float64 for an int64 column. When it does, a subset
// of the files from was inferred from reads as to without looking at them.
func CSVTypeCovers(to, from arrow.DataType) bool {
	switch {
	case arrow.TypeEqual(to, from), to.ID() == arrow.STRING:
		return true
	case to.ID() == arrow.FLOAT64:
		return from.ID() == arrow.INT64
	}
	return false
}

// CheckFits refuses types (by column name) that the values of the files
// added so far do not fit by the inference rule (CSVValueFits): decoding
// them as such would fail, or convert text that is not of the type ("+5",
// "0x10" as numbers). Columns types does not name are not checked; a
// column it names that the files lack is an error. Errors name the
// column, the type asked for and the type its values give; the caller
// wraps them.
func (c *CSVInference) CheckFits(types map[string]arrow.DataType) error {
	for i, n := range c.names {
		t, ok := types[n]
		if !ok {
			continue
		}
		if !kindFits(t, c.kinds[i]) {
			want, _ := CSVTypeName(t)
			have, _ := CSVTypeName(c.kinds[i].arrowType())
			return fmt.Errorf("column %q does not read as %s: its values make it %s", n, cmp.Or(want, t.String()), have)
		}
	}
	for n := range types {
		if _, ok := c.index[n]; !ok && c.index != nil {
			return fmt.Errorf("the files have no column %q", n)
		}
	}
	return nil
}
