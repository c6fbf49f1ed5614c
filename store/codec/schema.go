package codec

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// FieldIDKey is the field metadata key pqarrow adds to every field it reads.
const FieldIDKey = "PARQUET:field_id"

// CheckUniqueNames refuses a schema that names a column twice.
func CheckUniqueNames(sc *arrow.Schema) error {
	seen := make(map[string]bool, sc.NumFields())
	for _, f := range sc.Fields() {
		if seen[f.Name] {
			return fmt.Errorf("%w: duplicate column %q", ErrSchemaMismatch, f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}

// FieldNames lists the column names of sc in order.
func FieldNames(sc *arrow.Schema) []string {
	out := make([]string, sc.NumFields())
	for i, f := range sc.Fields() {
		out[i] = f.Name
	}
	return out
}

// QuoteNames renders names for an error message: ["a", "b"].
func QuoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// StripFieldIDs removes the PARQUET:field_id metadata that pqarrow adds to
// every field it reads, at every depth, so that a schema read back compares
// equal to the one that was written. Other metadata is kept.
func StripFieldIDs(sc *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, sc.NumFields())
	for i, f := range sc.Fields() {
		fields[i] = stripField(f)
	}
	md := sc.Metadata()
	return arrow.NewSchema(fields, &md)
}

func stripField(f arrow.Field) arrow.Field {
	if f.HasMetadata() && f.Metadata.FindKey(FieldIDKey) >= 0 {
		keys, vals := f.Metadata.Keys(), f.Metadata.Values()
		var k2, v2 []string
		for i, k := range keys {
			if k != FieldIDKey {
				k2, v2 = append(k2, k), append(v2, vals[i])
			}
		}
		f.Metadata = arrow.NewMetadata(k2, v2)
	}
	f.Type = stripType(f.Type)
	return f
}

func stripType(dt arrow.DataType) arrow.DataType {
	switch t := dt.(type) {
	case *arrow.ListType:
		return arrow.ListOfField(stripField(t.ElemField()))
	case *arrow.LargeListType:
		return arrow.LargeListOfField(stripField(t.ElemField()))
	case *arrow.ListViewType:
		return arrow.ListViewOfField(stripField(t.ElemField()))
	case *arrow.LargeListViewType:
		return arrow.LargeListViewOfField(stripField(t.ElemField()))
	case *arrow.FixedSizeListType:
		return arrow.FixedSizeListOfField(t.Len(), stripField(t.ElemField()))
	case *arrow.StructType:
		kids := make([]arrow.Field, t.NumFields())
		for i, c := range t.Fields() {
			kids[i] = stripField(c)
		}
		return arrow.StructOf(kids...)
	case *arrow.MapType:
		m := arrow.MapOfFields(stripField(t.KeyField()), stripField(t.ItemField()))
		m.KeysSorted = t.KeysSorted
		return m
	case *arrow.DictionaryType:
		return &arrow.DictionaryType{IndexType: t.IndexType, ValueType: stripType(t.ValueType), Ordered: t.Ordered}
	}
	return dt
}

// Project returns the schema of the named columns in the order asked (nil:
// all of sc), or an error naming the unknown ones and the columns there are.
func Project(sc *arrow.Schema, cols []string) (*arrow.Schema, error) {
	if cols == nil {
		return sc, nil
	}
	fields := make([]arrow.Field, 0, len(cols))
	var unknown []string
	seen := make(map[string]bool, len(cols))
	for _, c := range cols {
		idx := sc.FieldIndices(c)
		if len(idx) == 0 {
			unknown = append(unknown, c)
			continue
		}
		if seen[c] {
			return nil, fmt.Errorf("%w: column %q asked for twice", ErrInvalid, c)
		}
		seen[c] = true
		fields = append(fields, sc.Field(idx[0]))
	}
	if len(unknown) > 0 {
		names := FieldNames(sc)
		sort.Strings(names)
		return nil, fmt.Errorf("%w: no column %s (columns are %s)", ErrInvalid, QuoteNames(unknown), QuoteNames(names))
	}
	md := sc.Metadata()
	return arrow.NewSchema(fields, &md), nil
}

// FileSchema is the schema of the data files of a version with schema sc
// partitioned by the named columns: sc without them (their values live in
// the directory names). With no partition columns it is sc itself.
func FileSchema(sc *arrow.Schema, partitionBy []string) *arrow.Schema {
	if len(partitionBy) == 0 {
		return sc
	}
	keep := make([]arrow.Field, 0, sc.NumFields())
	for _, f := range sc.Fields() {
		if !slices.Contains(partitionBy, f.Name) {
			keep = append(keep, f)
		}
	}
	md := sc.Metadata()
	return arrow.NewSchema(keep, &md)
}
