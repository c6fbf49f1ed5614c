package codec

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/decimal256"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
)

// MaxNesting bounds how deeply types may nest (a list of structs of lists
// … counts one level per type).
const MaxNesting = 64

// msPerDay is the unit date64 values must be whole multiples of.
const msPerDay = 86_400_000

// ValidateSchema checks a schema before any of its data is read: unique
// column names, nesting at most MaxNesting deep, decimal precisions in
// range and integer dictionary indices. The error wraps ErrInvalid or
// ErrSchemaMismatch (duplicate names) and names the column.
func ValidateSchema(sc *arrow.Schema) error {
	if sc == nil {
		return fmt.Errorf("%w: no schema", ErrInvalid)
	}
	if err := CheckUniqueNames(sc); err != nil {
		return err
	}
	size := 0
	md := sc.Metadata()
	for i, k := range md.Keys() {
		size += len(k) + len(md.Values()[i])
		if reservedMetadataKey(k) {
			return fmt.Errorf("%w: schema metadata key %q is reserved: Parquet, Arrow and Quiver write keys of this form themselves (%s, %s, %s…); rename it", ErrInvalid, k, "ARROW:schema", "PARQUET:…", SchemaVersionKey)
		}
	}
	for _, f := range sc.Fields() {
		if err := validateType(f.Type, 1); err != nil {
			return fmt.Errorf("%w: column %q: %v", ErrInvalid, f.Name, err)
		}
		size += metadataSize(f)
	}
	if size > MaxMetadataBytes {
		return fmt.Errorf("%w: the schema's metadata is %d bytes, more than %d: it is copied into every file, so it is kept small", ErrInvalid, size, MaxMetadataBytes)
	}
	return nil
}

// MaxMetadataBytes bounds a schema's metadata (schema- and field-level,
// keys and values): it is stored in every data file's footer.
const MaxMetadataBytes = 1 << 20

// reservedMetadataKey reports schema metadata keys the writers set
// themselves: a client's would override them (ARROW:schema breaks every
// read; quiver.writer or quiver.request_id would forge the audit stamps).
func reservedMetadataKey(k string) bool {
	l := strings.ToLower(k)
	return strings.HasPrefix(l, "arrow:") || strings.HasPrefix(l, "parquet:") || strings.HasPrefix(l, "quiver.")
}

func metadataSize(f arrow.Field) int {
	n := 0
	for i, k := range f.Metadata.Keys() {
		n += len(k) + len(f.Metadata.Values()[i])
	}
	if nt, ok := f.Type.(arrow.NestedType); ok {
		for _, c := range nt.Fields() {
			n += metadataSize(c)
		}
	}
	return n
}

func validateType(dt arrow.DataType, depth int) error {
	if dt == nil {
		return fmt.Errorf("no type")
	}
	if depth > MaxNesting {
		return fmt.Errorf("types nest more than %d deep", MaxNesting)
	}
	switch t := dt.(type) {
	case arrow.DecimalType:
		maxPrec := map[arrow.Type]int32{arrow.DECIMAL32: 9, arrow.DECIMAL64: 18, arrow.DECIMAL128: 38, arrow.DECIMAL256: 76}[t.ID()]
		if p := t.GetPrecision(); p < 1 || p > maxPrec {
			return fmt.Errorf("%s: precision %d is outside 1…%d", dt, p, maxPrec)
		}
		if sc := t.GetScale(); sc < 0 || sc > t.GetPrecision() {
			return fmt.Errorf("%s: scale %d is outside 0…%d (Parquet cannot store it)", dt, sc, t.GetPrecision())
		}
	case *arrow.DictionaryType:
		if t.IndexType == nil || !arrow.IsInteger(t.IndexType.ID()) {
			return fmt.Errorf("%s: dictionary indices must be integers", dt)
		}
		return validateType(t.ValueType, depth+1)
	case arrow.ExtensionType:
		return validateType(t.StorageType(), depth+1)
	case *arrow.FixedSizeListType:
		if t.Len() < 0 {
			return fmt.Errorf("%s: negative list size", dt)
		}
	case *arrow.RunEndEncodedType:
		return validateType(t.Encoded(), depth+1)
	}
	if nt, ok := dt.(arrow.NestedType); ok {
		for _, c := range nt.Fields() {
			if err := validateType(c.Type, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// ValidateBatch checks a batch from an untrusted source before anything
// reads its values: that its columns match its schema in number, type and
// length; every buffer, offset, child length, dictionary index and union
// type id of every column (arrow-go's array.ValidateFull, which also checks
// UTF-8 and null counts); the values the Arrow spec constrains and Parquet
// would otherwise change (decimals within their precision, date64 values
// whole days); and that no field declared non-nullable holds a null where
// its parents are valid, at any depth. The error wraps ErrInvalid and names
// the column (a nested one by its path, "s.child") and, for nulls, how many.
//
// A batch it accepts can be encoded without panicking; whether the format
// can hold every type is the FileWriter's to say.
func ValidateBatch(rec arrow.RecordBatch) error {
	sc := rec.Schema()
	if err := ValidateSchema(sc); err != nil {
		return err
	}
	if int(rec.NumCols()) != sc.NumFields() {
		return fmt.Errorf("%w: the batch has %d columns, its schema %d", ErrInvalid, rec.NumCols(), sc.NumFields())
	}
	n := rec.NumRows()
	if n < 0 {
		return fmt.Errorf("%w: the batch has a negative row count", ErrInvalid)
	}
	cols := rec.Columns()
	for i, f := range sc.Fields() {
		col := cols[i]
		switch {
		case col == nil:
			return fmt.Errorf("%w: column %q is missing from the batch", ErrInvalid, f.Name)
		case !arrow.TypeEqual(col.DataType(), f.Type):
			return fmt.Errorf("%w: column %q holds %s, its schema says %s", ErrInvalid, f.Name, col.DataType(), f.Type)
		case int64(col.Len()) != n:
			return fmt.Errorf("%w: column %q has %d rows, the batch %d", ErrInvalid, f.Name, col.Len(), n)
		}
		if err := checkOffsets(col.Data(), 0); err != nil {
			return fmt.Errorf("%w: column %q is malformed: %v", ErrInvalid, f.Name, err)
		}
		if err := validateFull(col); err != nil {
			return fmt.Errorf("%w: column %q is malformed: %v", ErrInvalid, f.Name, err)
		}
		if err := checkPageBytes(col.Data(), f.Name, false); err != nil {
			return err
		}
		if err := checkValues(col, f.Name); err != nil {
			return err
		}
	}
	return checkNulls(sc, cols)
}

// validateFull is arrow-go's ValidateFull, on a view of the array in which
// null-type arrays (at any depth) have the one absent validity buffer their
// layout names: arrow-go's own IPC reader gives them none, and its
// validator then refuses what its reader made.
func validateFull(col arrow.Array) error {
	switch c := col.(type) {
	case *array.String:
		if err := array.Validate(c); err != nil || c.Len() == 0 {
			return err // (an empty one may have no offsets: ValueOffsets would panic)
		}
		return validateText(c, c.ValueOffsets(), c.ValueBytes())
	case *array.LargeString:
		if err := array.Validate(c); err != nil || c.Len() == 0 {
			return err
		}
		return validateText(c, c.ValueOffsets(), c.ValueBytes())
	}
	return validateView(col, array.ValidateFull)
}

// validateText is the rest of array.ValidateFull for a string column whose
// structure array.Validate has checked and whose offsets checkOffsets has
// (in bounds, non-decreasing): its null count, and UTF-8 checked once over all its values rather than
// value by value (a tenth of a put's validation time went to the calls):
// values that are valid UTF-8 together, each starting at the start of a
// character, are valid one by one. values are the bytes from the first
// offset on.
func validateText[O int32 | int64](col arrow.Array, offsets []O, values []byte) error {
	if err := checkNullCount(col.Data()); err != nil {
		return err
	}
	if len(offsets) < 2 {
		return nil
	}
	base := offsets[0]
	if utf8.Valid(values[:offsets[len(offsets)-1]-base]) {
		end := len(values)
		for i, o := range offsets[1 : len(offsets)-1] {
			if at := int(o - base); at < end && !utf8.RuneStart(values[at]) {
				return fmt.Errorf("string at index %d is not valid utf8", col.Data().Offset()+i+1)
			}
		}
		return nil
	}
	for i := range len(offsets) - 1 {
		if !utf8.Valid(values[offsets[i]-base : offsets[i+1]-base]) {
			return fmt.Errorf("string at index %d is not valid utf8", col.Data().Offset()+i)
		}
	}
	return nil
}

// checkNullCount is array.ValidateFull's check of a known null count
// against the validity bitmap.
func checkNullCount(d arrow.ArrayData) error {
	n := d.NullN()
	if n == array.UnknownNullCount {
		return nil
	}
	var want int
	if bufs := d.Buffers(); len(bufs) > 0 && bufs[0] != nil {
		want = d.Len() - bitutil.CountSetBits(bufs[0].Bytes(), d.Offset(), d.Len())
	}
	if n != want {
		return fmt.Errorf("null count is %d, its validity bitmap says %d", n, want)
	}
	return nil
}

// validateStructure is arrow-go's Validate (lengths of children, buffer
// sizes, first and last offsets; no scan of the values) on the same view.
func validateStructure(col arrow.Array) error { return validateView(col, array.Validate) }

// validateView runs validate on col, null-type arrays given their nil
// validity buffer (nullLayout).
func validateView(col arrow.Array, validate func(arrow.Array) error) error {
	d, changed := nullLayout(col.Data())
	if !changed {
		return validate(col)
	}
	defer d.Release()
	a := array.MakeFromData(d)
	defer a.Release()
	return validate(a)
}

// nullLayout returns d with buffer-less null arrays given their nil
// validity buffer; changed reports whether a new (to be released) data was
// made.
func nullLayout(d arrow.ArrayData) (arrow.ArrayData, bool) {
	changed := false
	kids := d.Children()
	newKids := make([]arrow.ArrayData, len(kids))
	var made []arrow.ArrayData
	for i, c := range kids {
		if !present(c) {
			newKids[i] = c
			continue
		}
		nc, ch := nullLayout(c)
		newKids[i] = nc
		if ch {
			changed = true
			made = append(made, nc)
		}
	}
	bufs := d.Buffers()
	if d.DataType().ID() == arrow.NULL && len(bufs) == 0 {
		bufs = []*memory.Buffer{nil}
		changed = true
	}
	if !changed {
		return d, false
	}
	nd := array.NewData(d.DataType(), d.Len(), bufs, newKids, d.NullN(), d.Offset())
	if dict := d.Dictionary(); present(dict) {
		nd.SetDictionary(dict)
	}
	for _, m := range made {
		m.Release()
	}
	return nd, true
}

// checkOffsets checks that every offset of every string and binary array,
// at any depth, lies within its data and never decreases. arrow-go's
// ValidateFull (v18.8) slices each value before it has looked at the
// offsets after it, so offsets that rise past the data and come back
// panic there; it runs after this.
func checkOffsets(d arrow.ArrayData, depth int) error {
	if depth > MaxNesting {
		return fmt.Errorf("nested more than %d deep", MaxNesting)
	}
	dt := d.DataType()
	if ext, ok := dt.(arrow.ExtensionType); ok {
		dt = ext.StorageType()
	}
	switch dt.ID() {
	case arrow.STRING, arrow.BINARY:
		if err := checkVarOffsets(d, 4); err != nil {
			return err
		}
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		if err := checkVarOffsets(d, 8); err != nil {
			return err
		}
	}
	for _, c := range d.Children() {
		if !present(c) {
			return fmt.Errorf("%s has a missing child array", d.DataType())
		}
		if err := checkOffsets(c, depth+1); err != nil {
			return err
		}
	}
	if dict := d.Dictionary(); present(dict) {
		return checkOffsets(dict, depth+1)
	}
	return nil
}

// MaxPageValueBytes bounds the bytes of the string or binary values that
// one Parquet page may be given: the writer ends a page only between
// chunks of pageWriteBatch values, and a page's uncompressed body (with its
// lengths, levels and up to a page of smaller values before the chunk)
// must stay under the page limit of the readers (arrow-go's, Quiver's own:
// parquet.DefaultMaxUncompressedPageSize, 256 MiB), or what was
// acknowledged could not be read (red team round 46's p46_01: one value of
// 256 MiB + 4 KiB, or 1,024 values of 260 KiB, put with a raised
// --max-recv-msg-size, and every read of the profile failed DATA_LOSS).
const MaxPageValueBytes = parquet.DefaultMaxUncompressedPageSize - 4<<20

// maxPageValueBytes is MaxPageValueBytes (a variable for tests).
var maxPageValueBytes int64 = MaxPageValueBytes

// pageWriteBatch is the values the Parquet writer takes at a time between
// its checks of a page's size (parquet.DefaultWriteBatchSize; the
// FileWriter leaves it as it is).
const pageWriteBatch = int(parquet.DefaultWriteBatchSize)

// checkPageBytes refuses a string or binary array (at any depth, path its
// column's) in which pageWriteBatch values in a row hold more than
// MaxPageValueBytes, and a dictionary whose values hold more in all (a
// dictionary page holds them all: dict). Its offsets are checked already
// (checkOffsets).
func checkPageBytes(d arrow.ArrayData, path string, dict bool) error {
	dt := d.DataType()
	if ext, ok := dt.(arrow.ExtensionType); ok {
		dt = ext.StorageType()
	}
	var most int64
	switch id := dt.ID(); {
	case d.Len() == 0: // (it may have no offsets)
	case id == arrow.STRING || id == arrow.BINARY:
		most = windowBytes(arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset():d.Offset()+d.Len()+1], dict)
	case id == arrow.LARGE_STRING || id == arrow.LARGE_BINARY:
		most = windowBytes(arrow.Int64Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset():d.Offset()+d.Len()+1], dict)
	}
	if most > maxPageValueBytes {
		what := fmt.Sprintf("%d values in a row", pageWriteBatch)
		switch {
		case dict:
			what = "the values of its dictionary"
		case d.Len() <= pageWriteBatch:
			what = "its values in this batch"
		}
		return fmt.Errorf("%w: column %q: %s hold %d bytes, more than the %d a Parquet page may be given (readers refuse larger pages): send such values in smaller batches", ErrInvalid, path, what, most, maxPageValueBytes)
	}
	for _, c := range d.Children() {
		if err := checkPageBytes(c, path, false); err != nil {
			return err
		}
	}
	if dd := d.Dictionary(); present(dd) {
		return checkPageBytes(dd, path, true)
	}
	return nil
}

// windowBytes is the most bytes pageWriteBatch values in a row hold, given
// their offsets (n+1 of them); all holds all of them.
func windowBytes[T int32 | int64](off []T, all bool) int64 {
	n := len(off) - 1
	if n <= 0 {
		return 0
	}
	if all || n <= pageWriteBatch {
		return int64(off[n] - off[0])
	}
	var most int64
	for i := 0; i+pageWriteBatch <= n; i++ {
		most = max(most, int64(off[i+pageWriteBatch]-off[i]))
	}
	return most
}

// present reports whether d is there, typed nils included.
func present(d arrow.ArrayData) bool {
	if ad, ok := d.(*array.Data); ok {
		return ad != nil
	}
	return d != nil
}

// checkVarOffsets checks the offsets (width bytes each) of one string or
// binary array from its raw buffers.
func checkVarOffsets(d arrow.ArrayData, width int) error {
	n, off := d.Len(), d.Offset()
	if n == 0 {
		return nil
	}
	bufs := d.Buffers()
	if len(bufs) < 3 || bufs[1] == nil {
		return fmt.Errorf("%s array without offsets", d.DataType())
	}
	if off < 0 || n < 0 || (off+n+1)*width > bufs[1].Len() {
		return fmt.Errorf("%s offsets buffer too small for offset %d and length %d", d.DataType(), off, n)
	}
	var limit int64
	if bufs[2] != nil {
		limit = int64(bufs[2].Len())
	}
	raw := bufs[1].Bytes()
	at := func(i int) int64 {
		if width == 4 {
			return int64(arrow.Int32Traits.CastFromBytes(raw)[i])
		}
		return arrow.Int64Traits.CastFromBytes(raw)[i]
	}
	prev := int64(0)
	for i := off; i <= off+n; i++ {
		v := at(i)
		switch {
		case v < 0 || v > limit:
			return fmt.Errorf("%s offset %d at index %d is outside its data (%d bytes)", d.DataType(), v, i, limit)
		case i > off && v < prev:
			return fmt.Errorf("%s offsets are not monotonically non-decreasing at index %d: %d < %d", d.DataType(), i, v, prev)
		}
		prev = v
	}
	return nil
}

// checkValues refuses values the Arrow spec forbids that Parquet would
// silently change: decimals beyond their precision (Parquet keeps only the
// bytes the precision needs) and date64 values that are not whole days
// (Parquet stores days). Values under a null slot are checked too, as
// Arrow C++'s ValidateFull does.
func checkValues(arr arrow.Array, path string) error {
	if !needsValueCheck(arr.DataType()) {
		return nil
	}
	bad := 0
	switch a := arr.(type) {
	case *array.Decimal32:
		lim := int64(pow10(a.DataType().(arrow.DecimalType).GetPrecision()))
		for i, v := range a.Values() {
			if a.IsValid(i) && (int64(v) >= lim || int64(v) <= -lim) {
				bad++
			}
		}
	case *array.Decimal64:
		lim := int64(pow10(a.DataType().(arrow.DecimalType).GetPrecision()))
		for i, v := range a.Values() {
			if a.IsValid(i) && (int64(v) >= lim || int64(v) <= -lim) {
				bad++
			}
		}
	case *array.Decimal128:
		lim := decimal128.GetScaleMultiplier(int(a.DataType().(arrow.DecimalType).GetPrecision()))
		neg := lim.Negate()
		for i, v := range a.Values() {
			if a.IsValid(i) && (v.GreaterEqual(lim) || v.LessEqual(neg)) {
				bad++
			}
		}
	case *array.Decimal256:
		lim := decimal256.GetScaleMultiplier(int(a.DataType().(arrow.DecimalType).GetPrecision()))
		neg := lim.Negate()
		for i, v := range a.Values() {
			if a.IsValid(i) && (v.GreaterEqual(lim) || v.LessEqual(neg)) {
				bad++
			}
		}
	case *array.Date64:
		far := 0
		for i, v := range a.Date64Values() {
			if !a.IsValid(i) {
				continue
			}
			if v%msPerDay != 0 {
				bad++
			} else if d := v / msPerDay; d > math.MaxInt32 || d < math.MinInt32 {
				far++ // Parquet stores days as int32
			}
		}
		if bad > 0 {
			return fmt.Errorf("%w: column %q holds %d date64 values that are not whole days", ErrInvalid, path, bad)
		}
		if far > 0 {
			return fmt.Errorf("%w: column %q holds %d date64 values beyond the dates Parquet can store (±2^31 days)", ErrInvalid, path, far)
		}
		return nil
	case *array.Time32:
		// Parquet has no time in seconds: arrow-go stores time32[s] as
		// milliseconds in an int32, which overflows past 2^31 ms.
		if a.DataType().(*arrow.Time32Type).Unit != arrow.Second {
			return nil
		}
		for i, v := range a.Time32Values() {
			if a.IsValid(i) && (int64(v)*1000 > math.MaxInt32 || int64(v)*1000 < math.MinInt32) {
				bad++
			}
		}
		if bad > 0 {
			return fmt.Errorf("%w: column %q holds %d time32[s] values beyond ±2^31 ms, which Parquet cannot store (a time of day is under 86,400 s)", ErrInvalid, path, bad)
		}
		return nil
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		for i := 0; i < a.NumField(); i++ {
			if err := checkValues(a.Field(i), path+"."+st.Field(i).Name); err != nil {
				return err
			}
		}
		return nil
	case *array.Map:
		if err := checkValues(a.Keys(), path+".key"); err != nil {
			return err
		}
		return checkValues(a.Items(), path+".value")
	case array.ListLike:
		return checkValues(a.ListValues(), path+"."+a.DataType().(arrow.ListLikeType).ElemField().Name)
	case *array.Dictionary:
		return checkValues(a.Dictionary(), path)
	case array.ExtensionArray:
		return checkValues(a.Storage(), path)
	case array.Union:
		ut := a.DataType().(arrow.UnionType)
		for i := 0; i < a.NumFields(); i++ {
			if err := checkValues(a.Field(i), path+"."+ut.Fields()[i].Name); err != nil {
				return err
			}
		}
		return nil
	case *array.RunEndEncoded:
		return checkValues(a.Values(), path)
	default:
		return nil
	}
	if bad > 0 {
		return fmt.Errorf("%w: column %q holds %d values with more digits than its precision (%s)", ErrInvalid, path, bad, arr.DataType())
	}
	return nil
}

// needsValueCheck reports whether dt holds decimals or date64 anywhere.
func needsValueCheck(dt arrow.DataType) bool {
	switch t := dt.(type) {
	case arrow.DecimalType, *arrow.Date64Type, *arrow.Time32Type:
		return true
	case *arrow.DictionaryType:
		return needsValueCheck(t.ValueType)
	case arrow.ExtensionType:
		return needsValueCheck(t.StorageType())
	case *arrow.RunEndEncodedType:
		return needsValueCheck(t.Encoded())
	case arrow.NestedType:
		for _, f := range t.Fields() {
			if needsValueCheck(f.Type) {
				return true
			}
		}
	}
	return false
}

// pow10 is 10^p for 0 ≤ p ≤ 18.
func pow10(p int32) uint64 {
	n := uint64(1)
	for range p {
		n *= 10
	}
	return n
}

// checkNulls refuses nulls in fields sc declares non-nullable, at any depth,
// where every parent is valid: Parquet cannot store them (a required column
// has no null), and pqarrow would make the nearest nullable parent null
// instead, losing its other values. The error names every such column with
// its null count.
func checkNulls(sc *arrow.Schema, cols []arrow.Array) error {
	counts := map[string]int{}
	for i, f := range sc.Fields() {
		if i < len(cols) && cols[i] != nil {
			countNulls(f, cols[i], nil, f.Name, counts)
		}
	}
	if len(counts) == 0 {
		return nil
	}
	paths := make([]string, 0, len(counts))
	for p := range counts {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	msgs := make([]string, len(paths))
	for i, p := range paths {
		s := "s"
		if counts[p] == 1 {
			s = ""
		}
		msgs[i] = fmt.Sprintf("column %q is declared non-nullable but holds %d null%s", p, counts[p], s)
	}
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(msgs, "; "))
}

// countNulls adds to counts the nulls of arr, field f, at the positions
// reach marks (nil: all) if f is non-nullable, then descends into the
// children that hold non-nullable fields with the positions whose parents
// are valid. It never reads outside arr's bounds, validated or not.
func countNulls(f arrow.Field, arr arrow.Array, reach []bool, path string, counts map[string]int) {
	n := arr.Len()
	if !f.Nullable {
		bad := 0
		dict, _ := arr.(*array.Dictionary)
		if reach != nil || arr.NullN() != 0 || dict != nil {
			for i := 0; i < n; i++ {
				if (reach == nil || reach[i]) && logicalNull(arr, dict, i) {
					bad++
				}
			}
		}
		if bad > 0 {
			counts[path] += bad
		}
	}
	if !hasNonNullable(f.Type) {
		return
	}
	valid := func(i int) bool { return (reach == nil || reach[i]) && arr.IsValid(i) }
	switch a := arr.(type) {
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		var kid []bool
		if reach != nil || a.NullN() != 0 {
			kid = make([]bool, n)
			for i := range kid {
				kid[i] = valid(i)
			}
		}
		for k := 0; k < a.NumField() && k < st.NumFields(); k++ {
			if child := a.Field(k); child.Len() >= n {
				countNulls(st.Field(k), child, kid, path+"."+st.Field(k).Name, counts)
			}
		}
	case array.ListLike:
		vals := a.ListValues()
		m := vals.Len()
		kid := make([]bool, m)
		for i := 0; i < n; i++ {
			if !valid(i) {
				continue
			}
			start, end := a.ValueOffsets(i)
			for j := max(start, 0); j < min(end, int64(m)); j++ {
				kid[j] = true
			}
		}
		elem := a.DataType().(arrow.ListLikeType).ElemField()
		if mt, ok := a.DataType().(*arrow.MapType); ok {
			// Name keys and values after the map, not its entries struct.
			entries, ok := vals.(*array.Struct)
			if !ok || entries.NumField() != 2 {
				return
			}
			countNulls(arrow.Field{Name: "entries", Type: elem.Type, Nullable: elem.Nullable}, vals, kid, path+".entries", counts)
			ek := make([]bool, m)
			for j := range ek {
				ek[j] = kid[j] && vals.IsValid(j)
			}
			for k, ef := range []arrow.Field{mt.KeyField(), mt.ItemField()} {
				if child := entries.Field(k); child.Len() >= m {
					countNulls(ef, child, ek, path+"."+ef.Name, counts)
				}
			}
			return
		}
		countNulls(elem, vals, kid, path+"."+elem.Name, counts)
	case array.ExtensionArray:
		countNulls(arrow.Field{Name: f.Name, Type: a.Storage().DataType(), Nullable: true}, a.Storage(), reach, path, counts)
	}
}

// logicalNull reports whether row i of arr is null, for a dictionary also
// when its index points at a null value.
func logicalNull(arr arrow.Array, dict *array.Dictionary, i int) bool {
	if arr.IsNull(i) {
		return true
	}
	if dict == nil {
		return false
	}
	j := dict.GetValueIndex(i)
	return j >= 0 && j < dict.Dictionary().Len() && dict.Dictionary().IsNull(j)
}

// hasNonNullable reports whether any field nested in dt is non-nullable.
func hasNonNullable(dt arrow.DataType) bool {
	switch t := dt.(type) {
	case *arrow.MapType:
		return true // keys
	case arrow.ExtensionType:
		return hasNonNullable(t.StorageType())
	case *arrow.StructType, *arrow.ListType, *arrow.LargeListType, *arrow.ListViewType, *arrow.LargeListViewType, *arrow.FixedSizeListType:
		for _, c := range t.(arrow.NestedType).Fields() {
			if !c.Nullable || hasNonNullable(c.Type) {
				return true
			}
		}
	}
	return false
}
