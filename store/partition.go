package store

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// maxPartitionSegment bounds one encoded "col=value" directory name.
const maxPartitionSegment = 200

// partitionable reports whether a column type can be a hive partition key:
// types whose values have one obvious text form that pyarrow parses back.
func partitionable(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.STRING, arrow.LARGE_STRING, arrow.BOOL, arrow.DATE32:
		return true
	case arrow.DICTIONARY:
		return partitionable(dt.(*arrow.DictionaryType).ValueType)
	}
	return false
}

// checkPartitionBy validates partition columns against the schema.
func checkPartitionBy(sc *arrow.Schema, by []string) error {
	seen := map[string]bool{}
	for _, c := range by {
		idx := sc.FieldIndices(c)
		switch {
		case len(idx) == 0:
			return fmt.Errorf("%w: partition column %q is not a column (columns are %s)", ErrInvalidArgument, c, quoteNames(fieldNames(sc)))
		case seen[c]:
			return fmt.Errorf("%w: partition column %q given twice", ErrInvalidArgument, c)
		case !partitionable(sc.Field(idx[0]).Type):
			return fmt.Errorf("%w: partition column %q has type %s; partition by integers, strings, booleans or dates", ErrInvalidArgument, c, sc.Field(idx[0]).Type)
		}
		if strings.ContainsAny(c, "/\\=\x00") || c == "" || strings.HasPrefix(c, ".") {
			return fmt.Errorf("%w: partition column name %q cannot name a directory", ErrInvalidArgument, c)
		}
		seen[c] = true
	}
	if len(by) > 0 && len(by) == sc.NumFields() {
		return fmt.Errorf("%w: every column is a partition column; keep at least one data column", ErrInvalidArgument)
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

// formatPartValue renders row i of a partition column as hive text; ok is
// false for a null.
func formatPartValue(a arrow.Array, i int) (string, bool) {
	if a.IsNull(i) {
		return "", false
	}
	switch c := a.(type) {
	case *array.Dictionary:
		return formatPartValue(c.Dictionary(), c.GetValueIndex(i))
	case *array.Date32:
		return c.Value(i).ToTime().Format("2006-01-02"), true
	case *array.Boolean:
		return strconv.FormatBool(c.Value(i)), true
	}
	return a.ValueStr(i), true
}

// parsePartValue is the inverse: hive text to a one-element array-ready
// value check. It canonicalises filter values ("05" → "5").
func canonicalPartValue(dt arrow.DataType, v string) (string, error) {
	if v == hiveDefaultValue {
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
		t, err := parseDate(v)
		if err != nil {
			return "", err
		}
		return t, nil
	case arrow.DICTIONARY:
		return canonicalPartValue(dt.(*arrow.DictionaryType).ValueType, v)
	}
	return v, nil
}

func parseDate(v string) (string, error) {
	t, err := time.Parse("2006-01-02", v)
	if err != nil {
		return "", err
	}
	return t.Format("2006-01-02"), nil
}

// partKey is the encoded directory path of one partition and its raw values.
type partKey struct {
	dir    string            // "region=eu/day=2026-01-02"
	values map[string]string // raw values; nulls are hiveDefaultValue
}

// partitionDir encodes values as hive directories, in partition order.
func partitionDir(by []string, values []string, nulls []bool) (string, error) {
	segs := make([]string, len(by))
	for i, c := range by {
		v := hiveDefaultValue
		if !nulls[i] {
			if values[i] == "" {
				return "", fmt.Errorf("%w: partition column %q holds an empty string, which pyarrow would read back as null", ErrInvalidArgument, c)
			}
			v = uriEscape(values[i])
		}
		segs[i] = uriEscape(c) + "=" + v
		if len(segs[i]) > maxPartitionSegment {
			return "", fmt.Errorf("%w: partition value of %q is too long for a directory name", ErrInvalidArgument, c)
		}
	}
	return strings.Join(segs, "/"), nil
}

// parsePartitionDir decodes "region=eu/day=…" into raw values.
func parsePartitionDir(dir string) (map[string]string, error) {
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
		if v != hiveDefaultValue {
			if v, err = url.PathUnescape(v); err != nil {
				return nil, err
			}
		}
		out[ku] = v
	}
	return out, nil
}

// split groups the rows of rec by partition. Runs of rows with the same key
// become zero-copy slices; a key spread over several runs is gathered with
// Take. Each returned batch must be released.
func splitByPartition(ctx context.Context, rec arrow.RecordBatch, by []int, names []string) ([]string, []arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	if n == 0 {
		return nil, nil, nil
	}
	cols := make([]arrow.Array, len(by))
	for i, c := range by {
		cols[i] = rec.Column(c)
	}
	values := make([]string, len(by))
	nulls := make([]bool, len(by))
	// Encoded directory names are cached by raw values: rows in random
	// partition order make every run one row long.
	dirOf := map[string]string{}
	var raw strings.Builder
	keyOf := func(row int) (string, error) {
		raw.Reset()
		for i, c := range cols {
			v, ok := formatPartValue(c, row)
			values[i], nulls[i] = v, !ok
			if ok {
				raw.WriteByte(1)
				raw.WriteString(v)
			} else {
				raw.WriteByte(0)
			}
		}
		if d, ok := dirOf[raw.String()]; ok {
			return d, nil
		}
		d, err := partitionDir(names, values, nulls)
		if err == nil {
			dirOf[raw.String()] = d
		}
		return d, err
	}
	// Keys are built once per run of equal values, not per row.
	eq := make([]func(i, j int) bool, len(cols))
	for i, c := range cols {
		eq[i] = equalRows(c)
	}
	same := func(i, j int) bool {
		for _, f := range eq {
			if !f(i, j) {
				return false
			}
		}
		return true
	}
	type run struct{ start, end int }
	var order []string
	runs := map[string][]run{}
	start := 0
	for row := 1; row <= n; row++ {
		if row < n && same(row-1, row) {
			continue
		}
		k, err := keyOf(start)
		if err != nil {
			return nil, nil, err
		}
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], run{start, row})
		start = row
	}
	out := make([]arrow.RecordBatch, 0, len(order))
	release := func() {
		for _, r := range out {
			r.Release()
		}
	}
	for _, k := range order {
		rs := runs[k]
		if len(rs) == 1 {
			out = append(out, rec.NewSlice(int64(rs[0].start), int64(rs[0].end)))
			continue
		}
		bld := array.NewInt64Builder(memory.DefaultAllocator)
		for _, r := range rs {
			for i := r.start; i < r.end; i++ {
				bld.Append(int64(i))
			}
		}
		idx := bld.NewArray()
		bld.Release()
		taken, err := compute.Take(ctx, *compute.DefaultTakeOptions(), compute.NewDatumWithoutOwning(rec), compute.NewDatumWithoutOwning(idx))
		idx.Release()
		if err != nil {
			release()
			return nil, nil, err
		}
		out = append(out, taken.(*compute.RecordDatum).Value)
	}
	return order, out, nil
}

// constantColumn builds an array of n copies of a partition value.
func constantColumn(mem memory.Allocator, dt arrow.DataType, raw string, n int) (arrow.Array, error) {
	if raw == hiveDefaultValue {
		return array.MakeArrayOfNull(mem, dt, n), nil
	}
	if dict, ok := dt.(*arrow.DictionaryType); ok {
		vals, err := constantColumn(mem, dict.ValueType, raw, 1)
		if err != nil {
			return nil, err
		}
		defer vals.Release()
		ib := array.NewBuilder(mem, dict.IndexType)
		defer ib.Release()
		for i := 0; i < n; i++ {
			if err := ib.AppendValueFromString("0"); err != nil {
				return nil, err
			}
		}
		idx := ib.NewArray()
		defer idx.Release()
		return array.NewDictionaryArray(dict, idx, vals), nil
	}
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	b.Reserve(n)
	for i := 0; i < n; i++ {
		var err error
		if dt.ID() == arrow.STRING || dt.ID() == arrow.LARGE_STRING {
			b.(interface{ Append(string) }).Append(raw)
		} else {
			err = b.AppendValueFromString(raw)
		}
		if err != nil {
			return nil, fmt.Errorf("partition value %q is not a %s: %w", raw, dt, err)
		}
	}
	return b.NewArray(), nil
}

// equalRows returns a comparison of two rows of a partition column.
func equalRows(a arrow.Array) func(i, j int) bool {
	nullEq := func(i, j int) (bool, bool) {
		ni, nj := a.IsNull(i), a.IsNull(j)
		if ni || nj {
			return ni == nj, true
		}
		return false, false
	}
	switch c := a.(type) {
	case *array.Int64:
		return func(i, j int) bool {
			if r, ok := nullEq(i, j); ok {
				return r
			}
			return c.Value(i) == c.Value(j)
		}
	case *array.Int32:
		return func(i, j int) bool {
			if r, ok := nullEq(i, j); ok {
				return r
			}
			return c.Value(i) == c.Value(j)
		}
	case *array.String:
		return func(i, j int) bool {
			if r, ok := nullEq(i, j); ok {
				return r
			}
			return c.Value(i) == c.Value(j)
		}
	case *array.LargeString:
		return func(i, j int) bool {
			if r, ok := nullEq(i, j); ok {
				return r
			}
			return c.Value(i) == c.Value(j)
		}
	case *array.Date32:
		return func(i, j int) bool {
			if r, ok := nullEq(i, j); ok {
				return r
			}
			return c.Value(i) == c.Value(j)
		}
	case *array.Dictionary:
		return func(i, j int) bool {
			if r, ok := nullEq(i, j); ok {
				return r
			}
			return c.GetValueIndex(i) == c.GetValueIndex(j)
		}
	}
	return func(i, j int) bool { return array.SliceEqual(a, int64(i), int64(i+1), a, int64(j), int64(j+1)) }
}
