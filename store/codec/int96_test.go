package codec

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TestInt96TimestampsKeepTheirZone: a file with INT96 timestamps (what
// Spark and Hive write) reads with the time zone its stored Arrow schema
// declares, none included, as pyarrow reads it; pqarrow alone read every
// INT96 column as timestamp[ns, UTC] (red team round 12's c05: a put of
// such a file froze a zone-aware type, and an append of the same naive
// data was then refused).
func TestInt96TimestampsKeepTheirZone(t *testing.T) {
	for _, tz := range []string{"", "UTC", "Europe/Paris"} {
		t.Run("tz="+tz, func(t *testing.T) {
			mem, ctx := checkedMem(t)
			dt := &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: tz}
			sc := schemaOf(field("ts", dt, true), field("n", arrow.PrimitiveTypes.Int64, false))
			rec := batch(t, mem, sc, `[{"ts": 0, "n": 1}, {"ts": 1000000000000000000, "n": 2}, {"ts": null, "n": 3}]`)
			defer rec.Release()
			var buf bytes.Buffer
			fw, err := pqarrow.NewFileWriter(sc, &buf, parquet.NewWriterProperties(),
				pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithDeprecatedInt96Timestamps(true)))
			if err != nil {
				t.Fatal(err)
			}
			if err := fw.Write(rec); err != nil {
				t.Fatal(err)
			}
			if err := fw.Close(); err != nil {
				t.Fatal(err)
			}
			pf, err := OpenParquet(bytes.NewReader(buf.Bytes()), int64(buf.Len()), ReadOptions{Allocator: mem})
			if err != nil {
				t.Fatal(err)
			}
			defer pf.Close()
			if got := pf.Schema().Field(0).Type; !arrow.TypeEqual(got, dt) {
				t.Fatalf("schema: %s, want %s", got, dt)
			}
			for _, parallel := range []int{0, 2} {
				pf.o.Parallel = parallel
				rr, err := pf.Records(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var got []arrow.RecordBatch
				for rr.Next() {
					r := rr.RecordBatch()
					if !arrow.TypeEqual(r.Column(0).DataType(), dt) {
						t.Fatalf("batch column: %s, want %s", r.Column(0).DataType(), dt)
					}
					r.Retain()
					got = append(got, r)
				}
				if err := rr.Err(); err != nil {
					t.Fatal(err)
				}
				rr.Release()
				tbl := array.NewTableFromRecords(sc, got)
				want := array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
				if !array.TableEqual(tbl, want) {
					t.Errorf("parallel %d: values differ", parallel)
				}
				tbl.Release()
				want.Release()
				for _, r := range got {
					r.Release()
				}
			}
		})
	}
}
