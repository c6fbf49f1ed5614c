package codec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// flatBatch is rows rows of every flat type a put may carry, each column
// nullable or not as its field says, with nulls in the nullable ones.
func flatBatch(mem memory.Allocator, rows int, seed uint64) arrow.RecordBatch {
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	md := arrow.NewMetadata([]string{"k"}, []string{"v"})
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "f16", Type: arrow.FixedWidthTypes.Float16, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "bb", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}, Nullable: true},
		{Name: "d32", Type: arrow.FixedWidthTypes.Date32},
		{Name: "ts", Type: ts, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 20, Scale: 2}, Nullable: true},
		{Name: "dict", Type: dict, Nullable: true},
		{Name: "nul", Type: arrow.Null, Nullable: true},
	}, &md)
	rng := rand.New(rand.NewPCG(seed, 1))
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	null := func(i int) bool { return sc.Field(i).Nullable && rng.IntN(7) == 0 }
	for range rows {
		for i, f := range sc.Fields() {
			fb := b.Field(i)
			if null(i) {
				fb.AppendNull()
				continue
			}
			v := rng.Int64N(1000)
			switch f.Name {
			case "i8":
				fb.(*array.Int8Builder).Append(int8(v))
			case "i16":
				fb.(*array.Int16Builder).Append(int16(v))
			case "i32":
				fb.(*array.Int32Builder).Append(int32(v))
			case "i64":
				fb.(*array.Int64Builder).Append(v * 1e9)
			case "u32":
				fb.(*array.Uint32Builder).Append(uint32(v))
			case "u64":
				fb.(*array.Uint64Builder).Append(uint64(v))
			case "f16":
				fb.(*array.Float16Builder).Append(float16.New(float32(v) / 8))
			case "f32":
				fb.(*array.Float32Builder).Append(float32(v) / 3)
			case "f64":
				fb.(*array.Float64Builder).Append(float64(v) / 7)
			case "b", "bb":
				fb.(*array.BooleanBuilder).Append(v%2 == 0)
			case "s":
				fb.(*array.StringBuilder).Append(fmt.Sprintf("s%d", v%50))
			case "ls":
				fb.(*array.LargeStringBuilder).Append(fmt.Sprintf("long-%d", v))
			case "bin":
				fb.(*array.BinaryBuilder).Append([]byte{byte(v), byte(v >> 8)})
			case "fsb":
				fb.(*array.FixedSizeBinaryBuilder).Append([]byte{byte(v), 1, 2})
			case "d32":
				fb.(*array.Date32Builder).Append(arrow.Date32(19000 + v))
			case "ts":
				fb.(*array.TimestampBuilder).Append(arrow.Timestamp(v * 1e6))
			case "dec":
				fb.(*array.Decimal128Builder).Append(decimal128.FromI64(v))
			case "dict":
				if err := fb.(*array.BinaryDictionaryBuilder).AppendString(fmt.Sprintf("d%d", v%5)); err != nil {
					panic(err)
				}
			case "nul":
				fb.AppendNull()
			}
		}
	}
	return b.NewRecordBatch()
}

// TestColumnWriterMatchesPqarrow: the parallel column writer writes the
// very bytes pqarrow's FileWriter writes, for every flat type, nullable
// or not, across row groups, with and without compression.
func TestColumnWriterMatchesPqarrow(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("the parallel writer needs two cores")
	}
	mem, _ := checkedMem(t)
	small := flatBatch(mem, 100, 1)
	defer small.Release()
	big := flatBatch(mem, parallelMinRows*3, 2)
	defer big.Release()
	cases := []struct {
		name string
		o    WriterOptions
		recs []arrow.RecordBatch
	}{
		{"one small batch", WriterOptions{}, []arrow.RecordBatch{small}},
		{"large batches", WriterOptions{}, []arrow.RecordBatch{big, small, big}},
		{"row groups", WriterOptions{RowGroupRows: parallelMinRows + 7}, []arrow.RecordBatch{big, small}},
		{"uncompressed, partitioned pages", WriterOptions{Compression: CompressionNone, Partitioned: true}, []arrow.RecordBatch{big}},
		{"metadata", WriterOptions{Metadata: map[string]string{"quiver.schema_version": "1.0", "a": "b"}}, []arrow.RecordBatch{big}},
		{"no rows", WriterOptions{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Allocator = mem
			sc := small.Schema()
			var probe bytes.Buffer
			props, pqs, err := writerProperties(sc, o, nil)
			if err != nil {
				t.Fatal(err)
			}
			cw, err := newColumnWriter(sc, pqs, &probe, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
			if err != nil || cw == nil {
				t.Fatalf("the schema is flat, want a column writer: %v, %v", cw, err)
			}
			_ = cw.Close()
			par := writeFile(t, sc, o, tc.recs...)
			o.Serial = true
			ser := writeFile(t, sc, o, tc.recs...)
			if !bytes.Equal(par, ser) {
				t.Fatalf("parallel writer: %d bytes, pqarrow: %d bytes; they differ", len(par), len(ser))
			}
			// Equal bytes: the round trip is pqarrow's, tested elsewhere.
		})
	}
}

// TestColumnWriterOnlyForFlatSchemas: nested columns go through pqarrow.
func TestColumnWriterOnlyForFlatSchemas(t *testing.T) {
	cases := []struct {
		name string
		f    arrow.Field
		flat bool
	}{
		{"int", field("a", arrow.PrimitiveTypes.Int64, true), true},
		{"list", field("a", arrow.ListOf(arrow.PrimitiveTypes.Int64), true), false},
		{"struct", field("a", arrow.StructOf(field("x", arrow.PrimitiveTypes.Int64, true)), true), false},
		{"map", field("a", arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), true), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := schemaOf(tc.f, field("b", arrow.PrimitiveTypes.Int32, false))
			props := mustProps(t, sc, WriterOptions{})
			pqs, err := pqarrow.ToParquet(sc, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
			if err != nil {
				t.Fatal(err)
			}
			if got := flatColumns(sc, pqs); got != tc.flat {
				t.Fatalf("flatColumns = %v, want %v", got, tc.flat)
			}
		})
	}
}

func mustProps(t *testing.T, sc *arrow.Schema, o WriterOptions) *parquet.WriterProperties {
	t.Helper()
	p, err := WriterProperties(sc, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
