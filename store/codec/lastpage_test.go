package codec

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// appendBatches are n batches of rows rows like the benchmark's small
// appends (bench/flightbench): an id, a float, a name of 997 values and a
// timestamp; every 7th name null.
func appendBatches(n, rows int) []arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{
		field("id", arrow.PrimitiveTypes.Int64, false),
		field("value", arrow.PrimitiveTypes.Float64, true),
		field("name", arrow.BinaryTypes.String, true),
		field("ts", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, true),
	}, nil)
	out := make([]arrow.RecordBatch, n)
	for k := range out {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		for i := range rows {
			v := int64(k*rows + i)
			b.Field(0).(*array.Int64Builder).Append(v)
			b.Field(1).(*array.Float64Builder).Append(float64(v) * 0.5)
			if v%7 == 0 {
				b.Field(2).AppendNull()
			} else {
				b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("name-%d", v%997))
			}
			b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + v))
		}
		out[k] = b.NewRecordBatch()
		b.Release()
	}
	return out
}

// writeBatches writes recs into one Parquet file, a row group every
// perGroup batches (0: one row group).
func writeBatches(tb testing.TB, recs []arrow.RecordBatch, perGroup int) []byte {
	var buf bytes.Buffer
	fw, err := NewFileWriter(&buf, recs[0].Schema(), WriterOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	for i, rec := range recs {
		if err := fw.Write(rec); err != nil {
			tb.Fatal(err)
		}
		if perGroup > 0 && (i+1)%perGroup == 0 {
			if err := fw.EndRowGroup(); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := fw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// TestParallelLastPagesSameFile: building the last pages of a row
// group's columns in parallel before its close writes the file Close
// alone writes, byte for byte (dictionary and plain columns, nulls, one
// and several row groups, a row group ended right after a full page).
func TestParallelLastPagesSameFile(t *testing.T) {
	defer func(v bool) { parallelLastPages = v }(parallelLastPages)
	for _, tc := range []struct{ batches, rows, perGroup int }{
		{1, 1, 0}, {19, 1000, 0}, {19, 1000, 5}, {3, 70_000, 1}, {2, 131_072, 1},
	} {
		t.Run(fmt.Sprintf("%dx%d/%d", tc.batches, tc.rows, tc.perGroup), func(t *testing.T) {
			recs := appendBatches(tc.batches, tc.rows)
			defer releaseBatches(recs)
			parallelLastPages = false
			serial := writeBatches(t, recs, tc.perGroup)
			parallelLastPages = true
			parallel := writeBatches(t, recs, tc.perGroup)
			if !bytes.Equal(serial, parallel) {
				t.Fatalf("the files differ: %d bytes serial, %d parallel", len(serial), len(parallel))
			}
		})
	}
}

// releaseBatches releases each of recs.
func releaseBatches(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// BenchmarkSharedAppendFile: the file a commit cycle writes for 19 small
// appends of 1,000 rows (what 32 writers gather per cycle), the last
// pages built serially by Close ("serial") or in parallel first
// ("lastpages"). (Joining the batches first, so that their columns are
// encoded in parallel too, was no faster: 4.0 ms against 3.8.)
func BenchmarkSharedAppendFile(b *testing.B) {
	defer func(v bool) { parallelLastPages = v }(parallelLastPages)
	recs := appendBatches(19, 1000)
	defer releaseBatches(recs)
	for _, v := range []string{"serial", "lastpages"} {
		b.Run(v, func(b *testing.B) {
			parallelLastPages = v != "serial"
			for b.Loop() {
				writeBatches(b, recs, 0)
			}
		})
	}
}
