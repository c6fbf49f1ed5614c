package store

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// conformPlan maps an incoming schema onto a version's schema: for each
// target column, the source column and whether it must be cast.
type conformPlan struct {
	target *arrow.Schema
	src    []int
	cast   []bool
	same   bool // identical: batches pass through untouched
}

// planConform checks that in has the same column names as target (in any
// order) with types equal or losslessly widenable, and returns how to
// convert. The error names every column that differs.
func planConform(in, target *arrow.Schema, castTypes bool, what string) (*conformPlan, error) {
	if err := checkUniqueNames(in); err != nil {
		return nil, err
	}
	var missing, extra []string
	for _, f := range target.Fields() {
		if len(in.FieldIndices(f.Name)) == 0 {
			missing = append(missing, f.Name)
		}
	}
	for _, f := range in.Fields() {
		if len(target.FieldIndices(f.Name)) == 0 {
			extra = append(extra, f.Name)
		}
	}
	if len(missing)+len(extra) > 0 {
		return nil, fmt.Errorf("%w: columns %s do not match existing columns %s of %s (missing %s, unexpected %s); write a new version to change the schema",
			ErrSchemaMismatch, quoteNames(fieldNames(in)), quoteNames(fieldNames(target)), what, quoteNames(missing), quoteNames(extra))
	}
	pl := &conformPlan{target: target, src: make([]int, target.NumFields()), cast: make([]bool, target.NumFields()), same: in.NumFields() == target.NumFields()}
	var bad []string
	for i, f := range target.Fields() {
		j := in.FieldIndices(f.Name)[0]
		pl.src[i] = j
		if j != i {
			pl.same = false
		}
		it := in.Field(j).Type
		if arrow.TypeEqual(it, f.Type) {
			continue
		}
		pl.same = false
		if !castTypes {
			continue
		}
		if sameLayout(it, f.Type) || losslessWidening(it, f.Type) {
			pl.cast[i] = true
			continue
		}
		bad = append(bad, fmt.Sprintf("%q is %s, not %s", f.Name, it, f.Type))
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w: column types differ from %s: %s; only lossless widening (int32→int64, float32→float64, string→large_string, …) is cast; write a new version to change types",
			ErrSchemaMismatch, what, strings.Join(bad, "; "))
	}
	return pl, nil
}

// apply converts one batch. The result must be released.
func (pl *conformPlan) apply(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if pl.same {
		rec.Retain()
		return rec, nil
	}
	cols := make([]arrow.Array, len(pl.src))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, j := range pl.src {
		a, err := conformArray(ctx, rec.Column(j), pl.target.Field(i).Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", pl.target.Field(i).Name, err)
		}
		cols[i] = a
	}
	return array.NewRecordBatch(pl.target, cols, rec.NumRows()), nil
}

// conformArray returns arr as type dt: the same array when the types are
// equal, the same buffers relabelled when only names or metadata of nested
// fields differ, else a cast. The result must be released.
func conformArray(ctx context.Context, arr arrow.Array, dt arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(arr.DataType(), dt) {
		arr.Retain()
		return arr, nil
	}
	if sameLayout(arr.DataType(), dt) {
		d := relabel(arr.Data(), dt)
		defer d.Release()
		return array.MakeFromData(d), nil
	}
	switch target := dt.(type) {
	case arrow.ExtensionType:
		// Parquet gives back the storage; wrap it again.
		storage, err := conformArray(ctx, arr, target.StorageType())
		if err != nil {
			return nil, err
		}
		defer storage.Release()
		return array.NewExtensionArrayWithStorage(target, storage), nil
	case *arrow.DictionaryType:
		return toDictionary(ctx, arr, target)
	}
	switch src := arr.(type) {
	case array.ExtensionArray:
		return conformArray(ctx, src.Storage(), dt)
	case *array.Dictionary:
		// Decode, then convert the values.
		dense, err := compute.TakeArray(ctx, src.Dictionary(), src.Indices())
		if err != nil {
			return nil, err
		}
		defer dense.Release()
		return conformArray(ctx, dense, dt)
	}
	return compute.CastArray(ctx, arr, compute.SafeCastOptions(dt))
}

// toDictionary returns arr as the dictionary type dt: a dictionary array
// keeps its indices and has its values converted; a dense array (Parquet
// keeps dictionaries of strings only) is encoded anew.
func toDictionary(ctx context.Context, arr arrow.Array, dt *arrow.DictionaryType) (arrow.Array, error) {
	if src, ok := arr.(*array.Dictionary); ok {
		vals, err := conformArray(ctx, src.Dictionary(), dt.ValueType)
		if err != nil {
			return nil, err
		}
		defer vals.Release()
		idx, err := conformArray(ctx, src.Indices(), dt.IndexType)
		if err != nil {
			return nil, err
		}
		defer idx.Release()
		return array.NewDictionaryArray(dt, idx, vals), nil
	}
	// arrow-go has no dictionary builder for large strings and binaries:
	// encode with the 32-bit offset type, then widen the values.
	proxy := dt.ValueType
	switch proxy.ID() {
	case arrow.LARGE_STRING:
		proxy = arrow.BinaryTypes.String
	case arrow.LARGE_BINARY:
		proxy = arrow.BinaryTypes.Binary
	}
	vals, err := conformArray(ctx, arr, proxy)
	if err != nil {
		return nil, err
	}
	defer vals.Release()
	enc, err := dictionaryEncode(&arrow.DictionaryType{IndexType: dt.IndexType, ValueType: proxy, Ordered: dt.Ordered}, vals)
	if err != nil {
		return nil, err
	}
	if arrow.TypeEqual(proxy, dt.ValueType) {
		return enc, nil
	}
	defer enc.Release()
	return toDictionary(ctx, enc, dt)
}

// dictionaryEncode builds a dictionary array of vals; arrow-go's builder
// panics on value types it does not support, which becomes an error here.
func dictionaryEncode(dt *arrow.DictionaryType, vals arrow.Array) (out arrow.Array, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("cannot dictionary-encode %s: %v", dt.ValueType, r)
		}
	}()
	b := array.NewDictionaryBuilder(memory.DefaultAllocator, dt)
	defer b.Release()
	if err := b.AppendArray(vals); err != nil {
		return nil, err
	}
	return b.NewArray(), nil
}

// relabel gives data the type dt, which has the same physical layout.
func relabel(d arrow.ArrayData, dt arrow.DataType) arrow.ArrayData {
	children := d.Children()
	var kids []arrow.ArrayData
	if nt, ok := dt.(arrow.NestedType); ok && len(children) > 0 {
		fields := nt.Fields()
		kids = make([]arrow.ArrayData, len(children))
		for i, c := range children {
			kids[i] = relabel(c, fields[i].Type)
		}
	}
	nd := array.NewData(dt, d.Len(), d.Buffers(), kids, d.NullN(), d.Offset())
	for _, k := range kids {
		k.Release()
	}
	if dict := d.Dictionary(); dict != nil {
		if dt2, ok := dt.(*arrow.DictionaryType); ok {
			dd := relabel(dict, dt2.ValueType)
			nd.SetDictionary(dd)
			dd.Release()
		}
	}
	return nd
}

// sameLayout reports whether two types differ only in field names,
// nullability or metadata of nested fields (as pqarrow renames list
// elements "item" to "element").
func sameLayout(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	switch at := a.(type) {
	case *arrow.DictionaryType:
		bt := b.(*arrow.DictionaryType)
		return arrow.TypeEqual(at.IndexType, bt.IndexType) && sameLayout(at.ValueType, bt.ValueType) && at.Ordered == bt.Ordered
	case *arrow.MapType:
		// keys_sorted is a promise about the data, not its layout; Parquet
		// does not keep it.
		bt := b.(*arrow.MapType)
		return sameLayout(at.KeyType(), bt.KeyType()) && sameLayout(at.ItemType(), bt.ItemType())
	case *arrow.FixedSizeListType:
		bt := b.(*arrow.FixedSizeListType)
		return at.Len() == bt.Len() && sameLayout(at.Elem(), bt.Elem())
	case arrow.NestedType:
		af, bf := at.Fields(), b.(arrow.NestedType).Fields()
		if len(af) != len(bf) {
			return false
		}
		if _, ok := a.(*arrow.StructType); ok {
			for i := range af {
				if af[i].Name != bf[i].Name {
					return false
				}
			}
		}
		for i := range af {
			if !sameLayout(af[i].Type, bf[i].Type) {
				return false
			}
		}
		// Unions etc. carry more than fields; require full equality there.
		switch a.(type) {
		case *arrow.ListType, *arrow.LargeListType, *arrow.ListViewType, *arrow.LargeListViewType, *arrow.StructType:
			return true
		}
		return arrow.TypeEqual(a, b)
	default:
		return arrow.TypeEqual(a, b)
	}
}

// losslessWidening lists the casts an append may ask for implicitly.
func losslessWidening(from, to arrow.DataType) bool {
	rank := func(id arrow.Type) (kind byte, bits int) {
		switch id {
		case arrow.INT8:
			return 'i', 8
		case arrow.INT16:
			return 'i', 16
		case arrow.INT32:
			return 'i', 32
		case arrow.INT64:
			return 'i', 64
		case arrow.UINT8:
			return 'u', 8
		case arrow.UINT16:
			return 'u', 16
		case arrow.UINT32:
			return 'u', 32
		case arrow.UINT64:
			return 'u', 64
		case arrow.FLOAT16:
			return 'f', 16
		case arrow.FLOAT32:
			return 'f', 32
		case arrow.FLOAT64:
			return 'f', 64
		}
		return 0, 0
	}
	fk, fb := rank(from.ID())
	tk, tb := rank(to.ID())
	switch {
	case fk == 0 || tk == 0:
	case fk == tk:
		return tb > fb
	case fk == 'u' && tk == 'i':
		return tb > fb
	case (fk == 'i' || fk == 'u') && tk == 'f':
		return (tb == 64 && fb <= 32) || (tb == 32 && fb <= 16)
	}
	switch {
	case from.ID() == arrow.STRING && to.ID() == arrow.LARGE_STRING,
		from.ID() == arrow.BINARY && to.ID() == arrow.LARGE_BINARY:
		return true
	}
	return false
}

func checkUniqueNames(sc *arrow.Schema) error {
	seen := map[string]bool{}
	for _, f := range sc.Fields() {
		if seen[f.Name] {
			return fmt.Errorf("%w: duplicate column %q", ErrSchemaMismatch, f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}

func fieldNames(sc *arrow.Schema) []string {
	out := make([]string, sc.NumFields())
	for i, f := range sc.Fields() {
		out[i] = f.Name
	}
	return out
}

func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// stripFieldIDs removes the PARQUET:field_id metadata that pqarrow adds to
// every field it reads, so schemas compare equal to what the client put.
func stripFieldIDs(sc *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, sc.NumFields())
	for i, f := range sc.Fields() {
		fields[i] = stripField(f)
	}
	md := sc.Metadata()
	return arrow.NewSchema(fields, &md)
}

func stripField(f arrow.Field) arrow.Field {
	if f.HasMetadata() {
		keys, vals := f.Metadata.Keys(), f.Metadata.Values()
		var k2, v2 []string
		for i, k := range keys {
			if k != "PARQUET:field_id" {
				k2, v2 = append(k2, k), append(v2, vals[i])
			}
		}
		f.Metadata = arrow.NewMetadata(k2, v2)
	}
	switch t := f.Type.(type) {
	case *arrow.ListType:
		f.Type = arrow.ListOfField(stripField(t.ElemField()))
	case *arrow.LargeListType:
		f.Type = arrow.LargeListOfField(stripField(t.ElemField()))
	case *arrow.FixedSizeListType:
		f.Type = arrow.FixedSizeListOfField(t.Len(), stripField(t.ElemField()))
	case *arrow.StructType:
		kids := make([]arrow.Field, t.NumFields())
		for i, c := range t.Fields() {
			kids[i] = stripField(c)
		}
		f.Type = arrow.StructOf(kids...)
	case *arrow.MapType:
		m := arrow.MapOfFields(stripField(t.KeyField()), stripField(t.ItemField()))
		m.KeysSorted = t.KeysSorted
		f.Type = m
	}
	return f
}

// project returns the schema of the named columns, in the order asked, or
// an error naming the unknown ones.
func project(sc *arrow.Schema, cols []string) (*arrow.Schema, error) {
	if cols == nil {
		return sc, nil
	}
	fields := make([]arrow.Field, 0, len(cols))
	var unknown []string
	seen := map[string]bool{}
	for _, c := range cols {
		idx := sc.FieldIndices(c)
		if len(idx) == 0 {
			unknown = append(unknown, c)
			continue
		}
		if seen[c] {
			return nil, fmt.Errorf("%w: column %q asked for twice", ErrInvalidArgument, c)
		}
		seen[c] = true
		fields = append(fields, sc.Field(idx[0]))
	}
	if len(unknown) > 0 {
		names := fieldNames(sc)
		sort.Strings(names)
		return nil, fmt.Errorf("%w: no column %s (columns are %s)", ErrInvalidArgument, quoteNames(unknown), quoteNames(names))
	}
	md := sc.Metadata()
	return arrow.NewSchema(fields, &md), nil
}
