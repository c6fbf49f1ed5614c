package codec

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// HiveDefault is the directory value of a null partition value, as pyarrow
// and Hive write and read it.
const HiveDefault = "__HIVE_DEFAULT_PARTITION__"

// MaxPartitionSegment bounds one encoded "col=value" directory name.
const MaxPartitionSegment = 200

// Partitionable reports whether a column type can be a hive partition key:
// types whose values have one obvious text form that pyarrow parses back.
func Partitionable(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.STRING, arrow.LARGE_STRING, arrow.BOOL, arrow.DATE32:
		return true
	case arrow.DICTIONARY:
		return Partitionable(dt.(*arrow.DictionaryType).ValueType)
	}
	return false
}

// CheckPartitionBy validates partition columns against the schema: each a
// column, once, of a Partitionable type, with a name that can name a
// directory, and at least one column left for the files.
func CheckPartitionBy(sc *arrow.Schema, by []string) error {
	seen := map[string]bool{}
	for _, c := range by {
		idx := sc.FieldIndices(c)
		switch {
		case len(idx) == 0:
			return fmt.Errorf("%w: partition column %q is not a column (columns are %s)", ErrInvalid, c, QuoteNames(FieldNames(sc)))
		case seen[c]:
			return fmt.Errorf("%w: partition column %q given twice", ErrInvalid, c)
		case !Partitionable(sc.Field(idx[0]).Type):
			return fmt.Errorf("%w: partition column %q has type %s; partition by integers, strings, booleans or dates", ErrInvalid, c, sc.Field(idx[0]).Type)
		}
		if strings.ContainsAny(c, "/\\=\x00") || c == "" || strings.HasPrefix(c, ".") {
			return fmt.Errorf("%w: partition column name %q cannot name a directory", ErrInvalid, c)
		}
		seen[c] = true
	}
	if len(by) > 0 && len(by) == sc.NumFields() {
		return fmt.Errorf("%w: every column is a partition column; keep at least one data column", ErrInvalid)
	}
	return nil
}

// uriEscape escapes like Arrow C++'s UriEscape (hive segment_encoding
// "uri"): every byte but the unreserved ones becomes %XX.
func uriEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// FormatPartValue renders row i of a partition column as hive text (dates
// as 2006-01-02, booleans as true/false); ok is false for a null.
func FormatPartValue(a arrow.Array, i int) (v string, ok bool) {
	if a.IsNull(i) {
		return "", false
	}
	// Copies: arrow-go's String.Value (and ValueStr) alias the array's
	// memory, and a partition value outlives its batch (file records,
	// commit records); the store's read pool reuses freed buffers, which
	// rewrote values so kept (red team round 7: compaction committed rows
	// under partition values of other bytes).
	switch c := a.(type) {
	case *array.Dictionary:
		return FormatPartValue(c.Dictionary(), c.GetValueIndex(i))
	case *array.Date32:
		return c.Value(i).ToTime().Format(time.DateOnly), true
	case *array.Boolean:
		return strconv.FormatBool(c.Value(i)), true
	case *array.String:
		return strings.Clone(c.Value(i)), true
	case *array.LargeString:
		return strings.Clone(c.Value(i)), true
	}
	return strings.Clone(a.ValueStr(i)), true
}

// CanonicalPartValue parses a partition value given as text (a client's
// filter) for a column of type dt and returns it as FormatPartValue would
// write it ("05" → "5"); HiveDefault (null) stays as it is.
func CanonicalPartValue(dt arrow.DataType, v string) (string, error) {
	if v == HiveDefault {
		return v, nil
	}
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", err
		}
		return strconv.FormatInt(n, 10), nil
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return "", err
		}
		return strconv.FormatUint(n, 10), nil
	case arrow.BOOL:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "", err
		}
		return strconv.FormatBool(b), nil
	case arrow.DATE32:
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return "", err
		}
		return t.Format(time.DateOnly), nil
	case arrow.DICTIONARY:
		return CanonicalPartValue(dt.(*arrow.DictionaryType).ValueType, v)
	}
	return v, nil
}

// PartitionDir encodes one partition's values as hive directories in
// partition order ("region=eu/day=2026-01-02"); nulls[i] marks a null
// value, written as HiveDefault. Values pyarrow would not read back as
// written are refused with ErrInvalid naming the column: the empty string
// and the string HiveDefault itself (both read back as null), and values
// too long for a directory name.
func PartitionDir(by []string, values []string, nulls []bool) (string, error) {
	segs := make([]string, len(by))
	for i, c := range by {
		v := HiveDefault
		if !nulls[i] {
			switch values[i] {
			case "":
				return "", fmt.Errorf("%w: partition column %q holds an empty string, which pyarrow would read back as null", ErrInvalid, c)
			case HiveDefault:
				return "", fmt.Errorf("%w: partition column %q holds the string %q, which pyarrow would read back as null", ErrInvalid, c, HiveDefault)
			}
			v = uriEscape(values[i])
		}
		segs[i] = uriEscape(c) + "=" + v
		if len(segs[i]) > MaxPartitionSegment {
			return "", fmt.Errorf("%w: partition value of %q is too long for a directory name", ErrInvalid, c)
		}
	}
	return strings.Join(segs, "/"), nil
}

// ParsePartitionDir decodes "region=eu/day=…" into raw values by column;
// a null is HiveDefault.
func ParsePartitionDir(dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, seg := range strings.Split(dir, "/") {
		k, v, ok := strings.Cut(seg, "=")
		if !ok {
			return nil, fmt.Errorf("segment %q is not col=value", seg)
		}
		ku, err := url.PathUnescape(k)
		if err != nil {
			return nil, err
		}
		if v != HiveDefault {
			if v, err = url.PathUnescape(v); err != nil {
				return nil, err
			}
		}
		out[ku] = v
	}
	return out, nil
}

// Part is the rows of one partition of a batch.
type Part struct {
	// Dir is the partition's encoded directory ("region=eu/year=2025").
	Dir string
	// Values are its raw values by column; a null is HiveDefault.
	Values map[string]string
	// Rows are its rows of the batch, ascending.
	Rows []int32
	// Batch holds its rows without the partition columns, with the schema
	// FileSchema(rec.Schema(), by) (SplitByPartition; nil from
	// GroupByPartition). It must be released.
	Batch arrow.RecordBatch
}

// Grouped is a batch's rows grouped by partition (GroupByPartition).
type Grouped struct {
	// Data is the batch without its partition columns (schema
	// FileSchema(rec.Schema(), by)). Release releases it.
	Data arrow.RecordBatch
	// Parts are the partitions in order of first appearance, with their
	// rows (no Batch).
	Parts []Part
}

// Release releases Data.
func (g *Grouped) Release() {
	if g.Data != nil {
		g.Data.Release()
		g.Data = nil
	}
}

// TakeRows returns the rows idx (ascending) of data as a batch: a slice,
// without a copy, when they are one run (shared: it holds all of data's
// buffers), else a copy gathered column by column. It must be released.
func TakeRows(ctx context.Context, data arrow.RecordBatch, idx []int32) (rec arrow.RecordBatch, shared bool, err error) {
	if len(idx) == 0 {
		return data.NewSlice(0, 0), true, nil
	}
	if int(idx[len(idx)-1]-idx[0]) == len(idx)-1 {
		return data.NewSlice(int64(idx[0]), int64(idx[len(idx)-1])+1), true, nil
	}
	rec, err = gatherBatch(ctx, data.Schema(), data, idx)
	return rec, false, err
}

// SplitByPartition groups the rows of rec by the values of the partition
// columns by (GroupByPartition) and gives each group its Batch: gathered
// with one Take, or sliced without a copy when its rows are one run.
// Allocations come from compute.GetAllocator(ctx). Each returned Batch
// must be released.
func SplitByPartition(ctx context.Context, rec arrow.RecordBatch, by []string) ([]Part, error) {
	g, err := GroupByPartition(ctx, rec, by)
	if err != nil || g == nil {
		return nil, err
	}
	defer g.Release()
	// (Gathering on every core made a 64-partition put 8% faster, and its
	// peak RSS 10 MiB higher, at 300 MiB.)
	for p := range g.Parts {
		if g.Parts[p].Batch, _, err = TakeRows(ctx, g.Data, g.Parts[p].Rows); err != nil {
			for _, q := range g.Parts[:p] {
				q.Batch.Release()
			}
			return nil, err
		}
	}
	return g.Parts, nil
}

// GroupByPartition groups the rows of rec by the values of the partition
// columns by, in order of first appearance, keeping the order of rows
// within each group, without copying them. It works on columns, not rows:
// each partition column is dictionary-encoded (one hash pass), the codes
// are combined into one group id per row, and the rows are ordered by
// group with a counting sort. Partition values that cannot name a
// directory are refused (see PartitionDir). It returns nil for an empty
// batch; the result must be released.
func GroupByPartition(ctx context.Context, rec arrow.RecordBatch, by []string) (*Grouped, error) {
	sc := rec.Schema()
	idx := make([]int, len(by))
	for i, c := range by {
		fi := sc.FieldIndices(c)
		if len(fi) != 1 {
			return nil, fmt.Errorf("%w: partition column %q is not a column of the batch", ErrInvalid, c)
		}
		idx[i] = fi[0]
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil, nil
	}
	fileSchema := FileSchema(sc, by)
	keep := make([]int, 0, fileSchema.NumFields())
	for i := range sc.Fields() {
		if !slices.Contains(idx, i) {
			keep = append(keep, i)
		}
	}
	gid, groups, err := groupIDs(ctx, rec, idx)
	if err != nil {
		return nil, err
	}
	// The first row of each group gives its directory; groups whose values
	// encode alike (a dictionary holding a value twice) become one.
	first := make([]int, groups)
	for i := range first {
		first[i] = -1
	}
	for row, g := range gid {
		if first[g] < 0 {
			first[g] = row
		}
	}
	values := make([]string, len(by))
	nulls := make([]bool, len(by))
	var parts []Part
	merged := make([]int32, groups) // group → part
	partOf := map[string]int32{}
	for g, row := range first {
		for i, c := range idx {
			v, ok := FormatPartValue(rec.Column(c), row)
			values[i], nulls[i] = v, !ok
		}
		dir, err := PartitionDir(by, values, nulls)
		if err != nil {
			return nil, err
		}
		p, ok := partOf[dir]
		if !ok {
			p = int32(len(parts))
			partOf[dir] = p
			raw := make(map[string]string, len(by))
			for i, c := range by {
				raw[c] = values[i]
				if nulls[i] {
					raw[c] = HiveDefault
				}
			}
			parts = append(parts, Part{Dir: dir, Values: raw})
		}
		merged[g] = p
	}
	// Counting sort of the rows by part: the rows of part p are
	// order[start[p]:start[p+1]], ascending.
	start := make([]int, len(parts)+1)
	for row, g := range gid {
		p := merged[g]
		gid[row] = p
		start[p+1]++
	}
	for p := range parts {
		start[p+1] += start[p]
	}
	order := make([]int32, n)
	next := slices.Clone(start[:len(parts)])
	for row, p := range gid {
		order[next[p]] = int32(row)
		next[p]++
	}
	for p := range parts {
		parts[p].Rows = order[start[p]:start[p+1]:start[p+1]]
	}
	// The columns are labelled with the schema's own type instances:
	// slices and gathers of them are then checked against the schema by
	// identity, not by arrow.TypeEqual, which can find equal dictionary
	// types different (asType).
	cols := make([]arrow.Array, len(keep))
	for i, c := range keep {
		col := rec.Column(c)
		col.Retain()
		cols[i] = asType(col, fileSchema.Field(i).Type)
	}
	data := array.NewRecordBatch(fileSchema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return &Grouped{Data: data, Parts: parts}, nil
}

// groupIDs numbers the distinct combinations of the columns idx of rec in
// order of first appearance: gid[row] is the row's group, of groups.
func groupIDs(ctx context.Context, rec arrow.RecordBatch, idx []int) (gid []int32, groups int, err error) {
	n := int(rec.NumRows())
	for k, c := range idx {
		codes, card, err := encodeColumn(ctx, rec.Column(c))
		if err != nil {
			return nil, 0, fmt.Errorf("split by partition column %q: %w", rec.ColumnName(c), err)
		}
		if k == 0 {
			gid, groups = codes, card
			continue
		}
		// Combine: key = gid*card + code fits in int64 (both below 2^31);
		// densify the keys with one more hash pass.
		keys := make([]int64, n)
		for row := range keys {
			keys[row] = int64(gid[row])*int64(card) + int64(codes[row])
		}
		data := array.NewData(arrow.PrimitiveTypes.Int64, n,
			[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(keys))}, nil, 0, 0)
		arr := array.NewInt64Data(data)
		data.Release()
		gid, groups, err = encodeColumn(ctx, arr)
		arr.Release()
		if err != nil {
			return nil, 0, fmt.Errorf("split by partition: %w", err)
		}
	}
	return gid, groups, nil
}

// encodeColumn returns a dense code per row of a, equal codes for equal
// values (nulls included, as one value), numbered in order of first
// appearance, and how many codes there are. A dictionary column is
// encoded by its indices.
func encodeColumn(ctx context.Context, a arrow.Array) ([]int32, int, error) {
	if d, ok := a.(*array.Dictionary); ok {
		a = d.Indices()
	}
	if a.DataType().ID() == arrow.DATE32 {
		// The hash kernels take date32 by its int32 storage.
		d := array.NewData(arrow.PrimitiveTypes.Int32, a.Len(), a.Data().Buffers(), nil, a.NullN(), a.Data().Offset())
		defer d.Release()
		a = array.MakeFromData(d)
		defer a.Release()
	}
	enc, err := compute.DictionaryEncodeArray(ctx, compute.DictionaryEncodeOptions{NullEncoding: compute.NullEncodingEncode}, a)
	if err != nil {
		return nil, 0, err
	}
	defer enc.Release()
	dict, ok := enc.(*array.Dictionary)
	if !ok {
		return nil, 0, fmt.Errorf("dictionary_encode gave %T", enc)
	}
	codes := make([]int32, a.Len())
	switch ix := dict.Indices().(type) {
	case *array.Int32:
		copy(codes, ix.Int32Values())
	default:
		for i := range codes {
			codes[i] = int32(dict.GetValueIndex(i))
		}
	}
	return codes, dict.Dictionary().Len(), nil
}

// ConstantColumn builds an array of n copies of a partition value given as
// hive text (HiveDefault: nulls), of type dt.
func ConstantColumn(mem memory.Allocator, dt arrow.DataType, raw string, n int) (arrow.Array, error) {
	if raw == HiveDefault {
		return array.MakeArrayOfNull(mem, dt, n), nil
	}
	if dict, ok := dt.(*arrow.DictionaryType); ok {
		vals, err := ConstantColumn(mem, dict.ValueType, raw, 1)
		if err != nil {
			return nil, err
		}
		defer vals.Release()
		// Every index is 0: a zeroed buffer.
		w := dict.IndexType.(arrow.FixedWidthDataType).BitWidth() / 8
		buf := memory.NewResizableBuffer(mem)
		buf.Resize(n * w)
		d := array.NewData(dict.IndexType, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
		buf.Release()
		idx := array.MakeFromData(d)
		d.Release()
		defer idx.Release()
		return array.NewDictionaryArray(dict, idx, vals), nil
	}
	if n > 1 {
		// Parse the value once, then repeat its bytes.
		one, err := ConstantColumn(mem, dt, raw, 1)
		if err != nil {
			return nil, err
		}
		defer one.Release()
		if a := repeatValue(mem, one, n); a != nil {
			return a, nil
		}
	}
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	b.Reserve(n)
	for i := 0; i < n; i++ {
		var err error
		switch bb := b.(type) {
		case *array.StringBuilder:
			bb.Append(raw)
		case *array.LargeStringBuilder:
			bb.Append(raw)
		default:
			err = b.AppendValueFromString(raw)
		}
		if err != nil {
			return nil, fmt.Errorf("partition value %q is not a %s: %w", raw, dt, err)
		}
	}
	return b.NewArray(), nil
}

// repeatValue returns n copies of the one value of a (not null) by
// repeating its bytes, for fixed-width, boolean and string/binary types;
// nil for other types.
func repeatValue(mem memory.Allocator, a arrow.Array, n int) arrow.Array {
	d := a.Data()
	bufs := d.Buffers()
	var out []*memory.Buffer
	switch dt := a.DataType().(type) {
	case *arrow.BooleanType:
		b := memory.NewResizableBuffer(mem)
		b.Resize(int(bitutil.BytesForBits(int64(n))))
		if a.(*array.Boolean).Value(0) {
			bitutil.SetBitsTo(b.Bytes(), 0, int64(n), true)
		}
		out = []*memory.Buffer{nil, b}
	case arrow.FixedWidthDataType:
		w := dt.BitWidth() / 8
		if w == 0 || dt.BitWidth()%8 != 0 {
			return nil
		}
		b := memory.NewResizableBuffer(mem)
		b.Resize(n * w)
		repeatBytes(b.Bytes(), bufs[1].Bytes()[d.Offset()*w:(d.Offset()+1)*w])
		out = []*memory.Buffer{nil, b}
	case *arrow.StringType, *arrow.BinaryType:
		var v []byte
		if s, ok := a.(*array.String); ok {
			v = []byte(s.Value(0))
		} else {
			v = a.(*array.Binary).Value(0)
		}
		if int64(len(v))*int64(n) > math.MaxInt32 {
			return nil
		}
		offs := memory.NewResizableBuffer(mem)
		offs.Resize((n + 1) * 4)
		o := arrow.Int32Traits.CastFromBytes(offs.Bytes())
		for i := range o {
			o[i] = int32(i * len(v))
		}
		data := memory.NewResizableBuffer(mem)
		data.Resize(n * len(v))
		repeatBytes(data.Bytes(), v)
		out = []*memory.Buffer{nil, offs, data}
	default:
		return nil
	}
	nd := array.NewData(a.DataType(), n, out, nil, 0, 0)
	for _, b := range out {
		if b != nil {
			b.Release()
		}
	}
	defer nd.Release()
	return array.MakeFromData(nd)
}

// repeatBytes fills dst with copies of v (len(dst) a multiple of len(v)).
func repeatBytes(dst, v []byte) {
	if len(v) == 0 || len(dst) == 0 {
		return
	}
	n := copy(dst, v)
	for n < len(dst) {
		n += copy(dst[n:], dst[:n])
	}
}
