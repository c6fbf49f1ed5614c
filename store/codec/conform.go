package codec

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"

	"github.com/quiverdb/quiver/internal/ipcdict"
)

// Conformer converts batches of one incoming schema to a target schema (a
// version's): columns matched by name and reordered, nested fields
// relabelled, types widened losslessly. Build it with PlanConform.
type Conformer struct {
	target *arrow.Schema
	nIn    int
	src    []int // target column -> incoming column
	same   bool  // same columns in the same order with equal types
}

// PlanConform checks that in (a put's schema) has the same column names
// as target (the profile's) (in any order) with types equal, equal but
// for nested field names, nullability and metadata, or (when castTypes)
// losslessly widenable, and returns how to convert. what names the target
// in messages ("sales/orders v3"). The error wraps ErrSchemaMismatch and
// names every column that differs.
//
// Without castTypes (CSV profiles, whose types are inferred on read and so
// never match what the writer sent) types are not compared at all.
func PlanConform(in, target *arrow.Schema, castTypes bool, what string) (*Conformer, error) {
	if err := CheckUniqueNames(in); err != nil {
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
			ErrSchemaMismatch, QuoteNames(FieldNames(in)), QuoteNames(FieldNames(target)), what, QuoteNames(missing), QuoteNames(extra))
	}
	c := &Conformer{target: target, nIn: in.NumFields(), src: make([]int, target.NumFields()), same: in.NumFields() == target.NumFields()}
	var bad []string
	for i, f := range target.Fields() {
		j := in.FieldIndices(f.Name)[0]
		c.src[i] = j
		if j != i {
			c.same = false
		}
		it := in.Field(j).Type
		if arrow.TypeEqual(it, f.Type) {
			continue
		}
		c.same = false
		if TypeConforms(it, f.Type, castTypes) {
			continue
		}
		bad = append(bad, fmt.Sprintf("%q is %s in this put but %s in the profile", f.Name, it, f.Type))
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w: column types differ from %s: %s; only lossless widening (int32→int64, float32→float64, string→large_string, …) is cast; write a new version to change types",
			ErrSchemaMismatch, what, strings.Join(bad, "; "))
	}
	return c, nil
}

// TypeConforms reports whether a column of type in is taken into one of
// type target as PlanConform plans (castTypes as its): the same type, the
// same layout under other names, or a lossless widening — or any type
// when types are not cast.
func TypeConforms(in, target arrow.DataType, castTypes bool) bool {
	return arrow.TypeEqual(in, target) || !castTypes || SameLayout(in, target) || LosslessWidening(in, target)
}

// HasType reports whether dt, or any type it nests (fields, dictionary
// values, extension storage), satisfies is.
func HasType(dt arrow.DataType, is func(arrow.DataType) bool) bool {
	if is(dt) {
		return true
	}
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		return HasType(t.ValueType, is)
	case arrow.ExtensionType:
		return HasType(t.StorageType(), is)
	case arrow.NestedType:
		for _, f := range t.Fields() {
			if HasType(f.Type, is) {
				return true
			}
		}
	}
	return false
}

// Target is the schema Apply produces.
func (c *Conformer) Target() *arrow.Schema { return c.target }

// Apply converts one batch of the planned incoming schema to the target
// schema. Nulls in a column (or nested field) the target declares
// non-nullable are refused with ErrInvalid naming the column and the count,
// even when the incoming schema allowed them; a batch without such nulls
// passes. Values are never changed. Allocations come from
// compute.GetAllocator(ctx). The result must be released.
func (c *Conformer) Apply(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if int(rec.NumCols()) != c.nIn {
		return nil, fmt.Errorf("%w: a batch has %d columns, its stream's schema %d", ErrInvalid, rec.NumCols(), c.nIn)
	}
	cols := make([]arrow.Array, len(c.src))
	defer releaseAll(cols)
	for i, j := range c.src {
		f := c.target.Field(i)
		if c.same {
			cols[i] = rec.Column(j)
			cols[i].Retain()
			continue
		}
		a, err := ConformArray(ctx, rec.Column(j), f.Type)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: cannot convert %s to %s: %v", ErrSchemaMismatch, f.Name, rec.Column(j).DataType(), f.Type, err)
		}
		cols[i] = a
	}
	if err := checkNulls(c.target, cols); err != nil {
		return nil, err
	}
	// Labelled with the target's own type instances, so that every later
	// batch made of these columns and a schema derived from the target is
	// checked by identity, not by arrow.TypeEqual (asType).
	for i := range cols {
		cols[i] = asType(cols[i], c.target.Field(i).Type)
	}
	return array.NewRecordBatch(c.target, cols, rec.NumRows()), nil
}

// ConformArray returns arr as type dt: the same array when the types are
// equal, the same buffers relabelled when only names, nullability or
// metadata of nested fields differ, else a safe cast (which fails rather
// than change a value). Extension and dictionary types are rebuilt around
// their storage, as Parquet gives back the storage type of the one and
// dense values for most of the other. Allocations come from
// compute.GetAllocator(ctx). The result must be released.
func ConformArray(ctx context.Context, arr arrow.Array, dt arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(arr.DataType(), dt) {
		arr.Retain()
		return arr, nil
	}
	if SameLayout(arr.DataType(), dt) {
		d := relabel(arr.Data(), dt)
		defer d.Release()
		return array.MakeFromData(d), nil
	}
	switch target := dt.(type) {
	case arrow.ExtensionType:
		storage, err := ConformArray(ctx, arr, target.StorageType())
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
		return ConformArray(ctx, src.Storage(), dt)
	case *array.Dictionary:
		dense, err := compute.TakeArray(ctx, src.Dictionary(), src.Indices())
		if err != nil {
			return nil, err
		}
		defer dense.Release()
		return ConformArray(ctx, dense, dt)
	}
	if sameShape(arr.DataType(), dt) {
		return conformChildren(ctx, arr, dt)
	}
	if dt.ID() == arrow.BOOL {
		// Text appended to a CSV Boolean column: "true" and "false" in any
		// case, as the inference rule reads them (the cast knows only a
		// few spellings: "tRuE" was refused; red team round 19's t05).
		switch src := arr.(type) {
		case *array.String:
			return textToBool(ctx, src)
		case *array.LargeString:
			return textToBool(ctx, src)
		}
	}
	return compute.CastArray(ctx, arr, compute.SafeCastOptions(dt))
}

// textToBool reads "true" and "false", in any case, as booleans; any
// other text fails, naming it.
func textToBool[T interface {
	arrow.Array
	Value(int) string
}](ctx context.Context, src T) (arrow.Array, error) {
	return textBools(compute.GetAllocator(ctx), src, func(v string) error {
		return fmt.Errorf("%w: %q is not a boolean (true or false)", ErrInvalid, v)
	})
}

// sameShape reports whether a and b are the same nested type but for the
// types of their children: the parent's buffers can be kept and each child
// conformed on its own (Parquet gives back date32 for a date64 inside a
// map, say, and arrow-go cannot cast maps).
func sameShape(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	switch a.ID() {
	case arrow.STRUCT:
		af, bf := a.(*arrow.StructType).Fields(), b.(*arrow.StructType).Fields()
		if len(af) != len(bf) {
			return false
		}
		for i := range af {
			if af[i].Name != bf[i].Name {
				return false
			}
		}
		return true
	case arrow.FIXED_SIZE_LIST:
		return a.(*arrow.FixedSizeListType).Len() == b.(*arrow.FixedSizeListType).Len()
	case arrow.LIST, arrow.LARGE_LIST, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW, arrow.MAP:
		return true
	}
	return false
}

// conformChildren rebuilds arr as dt from its own buffers and its children
// conformed to dt's child types.
func conformChildren(ctx context.Context, arr arrow.Array, dt arrow.DataType) (arrow.Array, error) {
	d := arr.Data()
	fields := dt.(arrow.NestedType).Fields()
	children := d.Children()
	if len(children) != len(fields) {
		return nil, fmt.Errorf("%s has %d children, %s %d", arr.DataType(), len(children), dt, len(fields))
	}
	kids := make([]arrow.ArrayData, len(children))
	defer func() {
		for _, k := range kids {
			if k != nil {
				k.Release()
			}
		}
	}()
	for i, c := range children {
		ca := array.MakeFromData(c)
		conv, err := ConformArray(ctx, ca, fields[i].Type)
		ca.Release()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fields[i].Name, err)
		}
		kids[i] = conv.Data()
		kids[i].Retain()
		conv.Release()
	}
	nd := array.NewData(dt, d.Len(), d.Buffers(), kids, d.NullN(), d.Offset())
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// toDictionary returns arr as the dictionary type dt: a dictionary array
// keeps its indices and has its values converted; a dense array is encoded
// anew.
func toDictionary(ctx context.Context, arr arrow.Array, dt *arrow.DictionaryType) (arrow.Array, error) {
	if src, ok := arr.(*array.Dictionary); ok {
		dict := array.MakeArrayOfNull(compute.GetAllocator(ctx), src.DataType().(*arrow.DictionaryType).ValueType, 0)
		if present(src.Data().Dictionary()) {
			// (pqarrow gives none to a dictionary of no values in a list.)
			dict.Release()
			dict = src.Dictionary()
			dict.Retain()
		}
		defer dict.Release()
		vals, err := ConformArray(ctx, dict, dt.ValueType)
		if err != nil {
			return nil, err
		}
		defer vals.Release()
		idx, err := ConformArray(ctx, src.Indices(), dt.IndexType)
		if err != nil {
			return nil, err
		}
		defer idx.Release()
		return array.NewDictionaryArray(dt, idx, vals), nil
	}
	// A narrow index is built as int32 and then cast, which fails rather
	// than wrap when the values outgrow it (arrow-go's builder wraps).
	if indexRoom(dt.IndexType) > 0 {
		enc, err := toDictionary(ctx, arr, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: dt.ValueType, Ordered: dt.Ordered})
		if err != nil {
			return nil, err
		}
		defer enc.Release()
		return toDictionary(ctx, enc, dt)
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
	vals, err := ConformArray(ctx, arr, proxy)
	if err != nil {
		return nil, err
	}
	defer vals.Release()
	enc, err := dictionaryEncode(ctx, &arrow.DictionaryType{IndexType: dt.IndexType, ValueType: proxy, Ordered: dt.Ordered}, vals)
	if err != nil {
		return nil, err
	}
	if arrow.TypeEqual(proxy, dt.ValueType) {
		return enc, nil
	}
	defer enc.Release()
	return toDictionary(ctx, enc, dt)
}

// dictionaryEncode builds a dictionary array of vals. arrow-go's builder
// panics on value types it has no memo table for; those are refused before
// it is called.
func dictionaryEncode(ctx context.Context, dt *arrow.DictionaryType, vals arrow.Array) (arrow.Array, error) {
	if !dictionaryBuildable(dt.ValueType) {
		return nil, fmt.Errorf("cannot dictionary-encode %s", dt.ValueType)
	}
	if ipcdict.IsFloat(dt.ValueType) {
		return encodeFloats(ctx, dt, vals)
	}
	b := array.NewDictionaryBuilder(compute.GetAllocator(ctx), dt)
	defer b.Release()
	if err := b.AppendArray(vals); err != nil {
		return nil, err
	}
	return b.NewArray(), nil
}

// encodeFloats dictionary-encodes floats by their bits, in order of first
// appearance: arrow-go's memo table takes 0.0 and -0.0 apart but every NaN
// for the same, so its dictionary changed NaN payloads (red team round
// 10's d01).
func encodeFloats(ctx context.Context, dt *arrow.DictionaryType, vals arrow.Array) (arrow.Array, error) {
	mem := compute.GetAllocator(ctx)
	var bitsOf func(i int) uint64
	switch a := vals.(type) {
	case *array.Float64:
		bitsOf = func(i int) uint64 { return math.Float64bits(a.Value(i)) }
	case *array.Float32:
		bitsOf = func(i int) uint64 { return uint64(math.Float32bits(a.Value(i))) }
	case *array.Float16:
		bitsOf = func(i int) uint64 { return uint64(a.Value(i).Uint16()) }
	default:
		return nil, fmt.Errorf("cannot dictionary-encode %s as floats", vals.DataType())
	}
	seen := map[uint64]int64{}
	first := array.NewInt64Builder(mem)
	defer first.Release()
	idx := array.NewInt64Builder(mem)
	defer idx.Release()
	idx.Reserve(vals.Len())
	for i := 0; i < vals.Len(); i++ {
		if vals.IsNull(i) {
			idx.AppendNull()
			continue
		}
		k, ok := seen[bitsOf(i)]
		if !ok {
			k = int64(first.Len())
			seen[bitsOf(i)] = k
			first.Append(int64(i))
		}
		idx.Append(k)
	}
	wide := idx.NewArray()
	defer wide.Release()
	indices, err := compute.CastArray(ctx, wide, compute.SafeCastOptions(dt.IndexType))
	if err != nil {
		return nil, err
	}
	defer indices.Release()
	take := first.NewArray()
	defer take.Release()
	dict, err := compute.TakeArray(ctx, vals, take)
	if err != nil {
		return nil, err
	}
	defer dict.Release()
	return array.NewDictionaryArray(dt, indices, dict), nil
}

// dictionaryBuildable lists the value types array.NewDictionaryBuilder
// supports.
func dictionaryBuildable(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.NULL, arrow.INT8, arrow.UINT8, arrow.INT16, arrow.UINT16, arrow.INT32, arrow.UINT32,
		arrow.INT64, arrow.UINT64, arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64,
		arrow.DATE32, arrow.DATE64, arrow.TIME32, arrow.TIME64, arrow.TIMESTAMP, arrow.DURATION,
		arrow.STRING, arrow.BINARY, arrow.FIXED_SIZE_BINARY, arrow.DECIMAL32, arrow.DECIMAL64,
		arrow.DECIMAL128, arrow.DECIMAL256, arrow.INTERVAL_MONTHS, arrow.INTERVAL_DAY_TIME,
		arrow.INTERVAL_MONTH_DAY_NANO:
		return true
	}
	return false
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
	if dict := d.Dictionary(); present(dict) {
		if dt2, ok := dt.(*arrow.DictionaryType); ok {
			dd := relabel(dict, dt2.ValueType)
			nd.SetDictionary(dd)
			dd.Release()
		}
	}
	return nd
}

// SameLayout reports whether two types differ only in field names,
// nullability or metadata of nested fields (pqarrow renames list elements
// "item" to "element"), so that one's buffers can be relabelled as the
// other. Struct field names must match: they name data.
func SameLayout(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	switch at := a.(type) {
	case *arrow.DictionaryType:
		bt := b.(*arrow.DictionaryType)
		return arrow.TypeEqual(at.IndexType, bt.IndexType) && SameLayout(at.ValueType, bt.ValueType) && at.Ordered == bt.Ordered
	case *arrow.MapType:
		// keys_sorted is a promise about the data, not its layout; Parquet
		// does not keep it.
		bt := b.(*arrow.MapType)
		return SameLayout(at.KeyType(), bt.KeyType()) && SameLayout(at.ItemType(), bt.ItemType())
	case *arrow.FixedSizeListType:
		bt := b.(*arrow.FixedSizeListType)
		return at.Len() == bt.Len() && SameLayout(at.Elem(), bt.Elem())
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
			if !SameLayout(af[i].Type, bf[i].Type) {
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

// LosslessWidening reports whether every value of type from has an exact
// value of type to: a wider integer of the same signedness, an unsigned
// into a wider signed integer, an integer into a float whose mantissa holds
// it (up to 32 bits into float64, 16 into float32), a wider float, or
// string/binary into their 64-bit-offset forms. These are the only casts an
// append may ask for implicitly.
func LosslessWidening(from, to arrow.DataType) bool {
	fk, fb := numericRank(from.ID())
	tk, tb := numericRank(to.ID())
	switch {
	case fk == 0 || tk == 0:
	case fk == tk:
		return tb > fb
	case fk == 'u' && tk == 'i':
		return tb > fb
	case (fk == 'i' || fk == 'u') && tk == 'f':
		return (tb == 64 && fb <= 32) || (tb == 32 && fb <= 16)
	}
	return (from.ID() == arrow.STRING && to.ID() == arrow.LARGE_STRING) ||
		(from.ID() == arrow.BINARY && to.ID() == arrow.LARGE_BINARY)
}

// numericRank classifies a numeric type: kind 'i', 'u' or 'f' and its
// width in bits; kind 0 for anything else.
func numericRank(id arrow.Type) (kind byte, bits int) {
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

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}
