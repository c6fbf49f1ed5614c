package codec

import (
	"fmt"
	"github.com/apache/arrow-go/v18/arrow/array"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// Format is the file format of a profile's data files.
type Format string

// The formats a profile can hold; one per profile.
const (
	FormatParquet Format = "parquet"
	FormatCSV     Format = "csv"
)

// Ext is the data file extension, without the dot.
func (f Format) Ext() string { return string(f) }

// ParseFormat accepts "parquet" (or "", the default) and "csv", in any case.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "", "parquet":
		return FormatParquet, nil
	case "csv":
		return FormatCSV, nil
	}
	return "", fmt.Errorf("%w: unknown format %q (want parquet or csv)", ErrInvalid, s)
}

// Compression is the codec of Parquet data pages.
type Compression string

// The compressions a Parquet file may be written with. Every Parquet
// reader that matters (pyarrow, polars, DuckDB, Spark) reads all four.
const (
	// CompressionZstd (the default) at level 1, as pyarrow writes it.
	CompressionZstd Compression = "zstd"
	// CompressionLZ4Raw is faster to decode and larger.
	CompressionLZ4Raw Compression = "lz4_raw"
	// CompressionSnappy is what older readers expect.
	CompressionSnappy Compression = "snappy"
	// CompressionNone stores pages as they are.
	CompressionNone Compression = "none"
)

// ParseCompression accepts the Compression names in any case ("" is zstd;
// "uncompressed" is none).
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(strings.ToLower(s)); c {
	case "":
		return CompressionZstd, nil
	case "uncompressed":
		return CompressionNone, nil
	case CompressionZstd, CompressionLZ4Raw, CompressionSnappy, CompressionNone:
		return c, nil
	}
	return "", fmt.Errorf("%w: unknown compression %q (want zstd, lz4_raw, snappy or none)", ErrInvalid, s)
}

func (c Compression) codec() (compress.Compression, int, error) {
	switch c {
	case "", CompressionZstd:
		// Level 1, as pyarrow/Arrow C++ default to: arrow-go's default
		// (3) spent half of a put's CPU time compressing, for ~5% smaller
		// files.
		return compress.Codecs.Zstd, 1, nil
	case CompressionLZ4Raw:
		return compress.Codecs.Lz4Raw, compress.DefaultCompressionLevel, nil
	case CompressionSnappy:
		return compress.Codecs.Snappy, compress.DefaultCompressionLevel, nil
	case CompressionNone:
		return compress.Codecs.Uncompressed, compress.DefaultCompressionLevel, nil
	}
	return 0, 0, fmt.Errorf("%w: unknown compression %q (want zstd, lz4_raw, snappy or none)", ErrInvalid, string(c))
}

// DefaultRowGroupRows caps the rows of one Parquet row group.
const DefaultRowGroupRows = 1 << 20

// WriterOptions describe how a FileWriter encodes.
type WriterOptions struct {
	// Format is FormatParquet (the default) or FormatCSV.
	Format Format
	// Compression of Parquet pages; zstd by default.
	Compression Compression
	// Partitioned selects small Parquet pages, for writers of which many
	// are open at once (one per partition); see WriterProperties.
	Partitioned bool
	// RowGroupRows caps the rows of a Parquet row group
	// (DefaultRowGroupRows if 0).
	RowGroupRows int64
	// Metadata is stored in a Parquet file's footer as key-value metadata
	// (in key order); CSV has nowhere to keep it.
	Metadata map[string]string
	// Allocator for the encoder's buffers (memory.DefaultAllocator if nil).
	Allocator memory.Allocator
	// Plain names top-level string, binary and fixed-size binary columns
	// to write without dictionary encoding. FileWriter adds the columns
	// whose first batch shows nearly every value distinct (see
	// dictionaryPays).
	Plain []string
	// Serial encodes a Parquet file's columns one after the other, as
	// pqarrow does, also where they could be encoded in parallel (flat
	// schemas, several cores). For comparisons and for callers that run
	// many writers at once.
	Serial bool
}

func (o WriterOptions) mem() memory.Allocator {
	if o.Allocator == nil {
		return memory.DefaultAllocator
	}
	return o.Allocator
}

// WriterProperties are the Parquet writer properties for files of schema
// sc.
//
// Dictionary encoding is on for byte-array columns (strings, binaries) only:
// for numbers arrow-go's dictionary hashing costs half of the write time
// and rarely pays. Columns in o.Plain are left out too.
//
// A partitioned put keeps one open writer per partition, and each column of
// each writer buffers its current data page (and dictionary) uncompressed
// until the page is full; with the 1 MiB defaults a 64-partition put of 20
// columns held over 2 GB that way. Partitioned writes use 64 KiB pages and
// 256 KiB dictionaries instead; other writes 256 KiB pages.
func WriterProperties(sc *arrow.Schema, o WriterOptions) (*parquet.WriterProperties, error) {
	props, _, err := writerProperties(sc, o, nil)
	return props, err
}

// writerProperties is WriterProperties, also returning sc as a Parquet
// schema: pqs if not nil (sc's, from an earlier call: converting a schema
// is a tenth of a small append's encoding).
func writerProperties(sc *arrow.Schema, o WriterOptions, pqs *schema.Schema) (*parquet.WriterProperties, *schema.Schema, error) {
	codec, level, err := o.Compression.codec()
	if err != nil {
		return nil, nil, err
	}
	rows := o.RowGroupRows
	if rows <= 0 {
		rows = DefaultRowGroupRows
	}
	opts := []parquet.WriterProperty{
		parquet.WithCompression(codec),
		parquet.WithCompressionLevel(level),
		parquet.WithMaxRowGroupLength(rows),
		parquet.WithAllocator(o.mem()),
		parquet.WithStats(true),
		parquet.WithDictionaryDefault(false),
		parquet.WithCreatedBy("quiver"),
	}
	if o.Partitioned {
		opts = append(opts, parquet.WithDataPageSize(64<<10), parquet.WithDictionaryPageSizeLimit(256<<10))
	} else {
		// Each column writer keeps page-sized buffers (the values, the
		// page they make, its compressed form): at arrow-go's 1 MiB,
		// a 20-column put held some 40 MiB more than at 256 KiB, for
		// files 0.5% smaller (docs/benchmarks.md, "ninth session").
		opts = append(opts, parquet.WithDataPageSize(256<<10))
	}
	if pqs == nil {
		if err := checkDictionaryValues(sc); err != nil {
			return nil, nil, err
		}
		if err := checkFixedSizeLists(sc); err != nil {
			return nil, nil, err
		}
		if pqs, err = pqarrow.ToParquet(sc, parquet.NewWriterProperties(opts...), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err != nil {
			return nil, nil, fmt.Errorf("%w: the schema cannot be stored as Parquet: %v", ErrInvalid, err)
		}
	}
	for i := 0; i < pqs.NumColumns(); i++ {
		c := pqs.Column(i)
		if (c.PhysicalType() == parquet.Types.ByteArray || c.PhysicalType() == parquet.Types.FixedLenByteArray) &&
			!(len(c.ColumnPath()) == 1 && slices.Contains(o.Plain, c.ColumnPath()[0])) {
			opts = append(opts, parquet.WithDictionaryPath(c.ColumnPath(), true))
		}
	}
	return parquet.NewWriterProperties(opts...), pqs, nil
}

// walkTypes calls visit with every column's type and, through
// dictionaries, extensions and nested types, every type inside it, each
// with its dotted path; the first error ends the walk.
func walkTypes(sc *arrow.Schema, visit func(path string, dt arrow.DataType) error) error {
	var walk func(path string, dt arrow.DataType) error
	walk = func(path string, dt arrow.DataType) error {
		if err := visit(path, dt); err != nil {
			return err
		}
		switch t := dt.(type) {
		case *arrow.DictionaryType:
			return walk(path, t.ValueType)
		case arrow.ExtensionType:
			return walk(path, t.StorageType())
		case arrow.NestedType:
			for _, f := range t.Fields() {
				if err := walk(path+"."+f.Name, f.Type); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, f := range sc.Fields() {
		if err := walk(f.Name, f.Type); err != nil {
			return err
		}
	}
	return nil
}

// checkFixedSizeLists refuses fixed_size_list columns (at any depth) of
// size 0: arrow-go v18.8 refused their schema, v18.9 takes it but writes a
// non-null empty list as a file no reader decodes (red team round 18's
// s06: every read of the version then failed).
func checkFixedSizeLists(sc *arrow.Schema) error {
	return walkTypes(sc, func(path string, dt arrow.DataType) error {
		if t, ok := dt.(*arrow.FixedSizeListType); ok && t.Len() <= 0 {
			return fmt.Errorf("%w: column %q: the schema cannot be stored as Parquet: a fixed_size_list of size %d (send it as a list)", ErrInvalid, path, t.Len())
		}
		return nil
	})
}

// checkDictionaryValues refuses the dictionary columns (at any depth)
// whose values arrow-go's Parquet writer cannot write: booleans, half
// floats, nulls and nested values. It accepts their schema and fails on
// the first batch, with a message naming a compute kernel, leaking memory
// when the dictionary is nested (v18.8); they are refused here, before
// any data, with the column named. (A partition column is not in the
// files' schema: a dictionary of booleans may partition.)
func checkDictionaryValues(sc *arrow.Schema) error {
	return walkTypes(sc, func(path string, dt arrow.DataType) error {
		if t, ok := dt.(*arrow.DictionaryType); ok {
			switch t.ValueType.(type) {
			case *arrow.BooleanType, *arrow.Float16Type, *arrow.NullType, arrow.NestedType:
				return fmt.Errorf("%w: column %q: the schema cannot be stored as Parquet: a dictionary of %s values cannot be written (send the column without a dictionary)", ErrInvalid, path, t.ValueType)
			}
		}
		return nil
	})
}

// CheckCSVTypes refuses columns that have no faithful text form: nested
// types, unions and run-end encoded arrays.
func CheckCSVTypes(sc *arrow.Schema) error {
	var bad []string
	for _, f := range sc.Fields() {
		switch f.Type.ID() {
		case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
			arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.STRING, arrow.LARGE_STRING, arrow.DATE32, arrow.TIMESTAMP, arrow.NULL:
		default:
			bad = append(bad, fmt.Sprintf("%q (%s)", f.Name, f.Type))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: columns %s cannot be stored in a CSV profile without changing their values (CSV holds numbers, booleans, strings, dates and timestamps as text); use a parquet profile", ErrInvalid, strings.Join(bad, ", "))
	}
	return nil
}

// CheckCSVValues refuses a batch whose values a CSV file would not give
// back: an empty string (read back as null), a carriage return (lost by
// the line reader), a row whose every field is empty (a blank line, which
// readers skip: the row would be lost), an integer-looking string with
// leading zeros or a sign ("007" is read back as the number 7), and a
// uint64 above the int64 range (read back as a float). The columns named
// in text are strings already by the version's files (an append's): any
// text there reads back as it is, so only an empty string and a carriage
// return are refused ("05" was refused as a number in a column holding
// "x"; red team round 18's s07). A value is never changed: the put is
// refused and names the column.
func CheckCSVValues(rec arrow.RecordBatch, text []string) error {
	n := int(rec.NumRows())
	empty := make([]bool, n) // row so far all empty
	for i := range empty {
		empty[i] = true
	}
	for ci, col := range rec.Columns() {
		name := rec.Schema().Field(ci).Name
		csvString := csvString
		if slices.Contains(text, name) {
			csvString = csvText
		}
		switch c := col.(type) {
		case *array.String:
			for i := 0; i < n; i++ {
				if c.IsNull(i) {
					continue
				}
				if err := csvString(name, c.Value(i)); err != nil {
					return err
				}
				empty[i] = false
			}
		case *array.LargeString:
			for i := 0; i < n; i++ {
				if c.IsNull(i) {
					continue
				}
				if err := csvString(name, c.Value(i)); err != nil {
					return err
				}
				empty[i] = false
			}
		case *array.Uint64:
			for i := 0; i < n; i++ {
				if c.IsValid(i) && c.Value(i) > math.MaxInt64 {
					return fmt.Errorf("%w: column %q holds %d, which a CSV profile reads back as a float; use a parquet profile", ErrInvalid, name, c.Value(i))
				}
				if c.IsValid(i) {
					empty[i] = false
				}
			}
		case *array.Null:
			// Every slot null (IsValid answers true: a null array has
			// no bitmap; red team round 18's s01).
		default:
			for i := 0; i < n; i++ {
				if col.IsValid(i) {
					empty[i] = false
				}
			}
		}
	}
	if rec.NumCols() == 0 && n > 0 {
		return fmt.Errorf("%w: a batch of %d rows has no columns: a CSV file has no line for such a row (the rows would be lost); use a parquet profile", ErrInvalid, n)
	}
	for i, e := range empty {
		if e {
			return fmt.Errorf("%w: row %d has no value in any column: a CSV file would hold a blank line, which readers skip (the row would be lost); use a parquet profile", ErrInvalid, i)
		}
	}
	return nil
}

// csvText refuses a value of a column that is text whatever it holds: the
// CSV file gives back every string but the empty one and carriage returns.
func csvText(col, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: column %q holds an empty string, which a CSV profile reads back as null; use a parquet profile", ErrInvalid, col)
	case strings.ContainsRune(v, '\r'):
		return fmt.Errorf("%w: column %q holds a carriage return, which a CSV profile does not give back; use a parquet profile", ErrInvalid, col)
	}
	return nil
}

// csvString refuses a value of a string column whose type the CSV files
// may yet decide: csvText's, and the text inference would take for a number
// it does not give back as written.
func csvString(col, v string) error {
	if err := csvText(col, v); err != nil {
		return err
	}
	switch {
	case isInteger(v) && (strings.HasPrefix(v, "+") || strings.HasPrefix(strings.TrimPrefix(v, "-"), "0") && len(strings.TrimPrefix(v, "-")) > 1 || v == "-0"):
		return fmt.Errorf("%w: column %q holds %q, which a CSV profile reads back as a number without its sign or leading zeros; use a parquet profile", ErrInvalid, col, v)
	case csvValueKind(v) == kindFloat && !parsesAsFloat(v):
		// Inferred as a number, but no float64 ("1e400", "-nan"): the
		// column's every read would fail (red team round 18's s04).
		return fmt.Errorf("%w: column %q holds %q, which a CSV profile takes for a number it cannot read back; use a parquet profile", ErrInvalid, col, v)
	case csvValueKind(v) == kindFloat && !floatTextKeeps(v):
		// "00.5" read back as 0.5, "1e-400" as 0 (red team round 19's
		// t05): as "05" above.
		return fmt.Errorf("%w: column %q holds %q, which a CSV profile reads back as another number (leading zeros dropped, or below float64's range); use a parquet profile", ErrInvalid, col, v)
	}
	return nil
}

// parsesAsFloat reports whether the CSV reader parses v as a float64.
func parsesAsFloat(v string) bool {
	_, err := strconv.ParseFloat(v, 64)
	return err == nil
}
