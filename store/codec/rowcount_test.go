package codec

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestFooterRowCountsChecked: a file whose footer gives its row group
// another row count than its pages hold (a crafted or damaged file, red
// team round 5's r06: a row group claiming 199 rows of 200 read 200) is an
// error on every read path, never more rows than the footer says.
func TestFooterRowCountsChecked(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sc := schemaOf(field("n", arrow.PrimitiveTypes.Int64, false), field("s", arrow.BinaryTypes.String, false))
	nb := array.NewInt64Builder(mem)
	sb := array.NewStringBuilder(mem)
	for i := range 200 {
		nb.Append(int64(i))
		sb.Append(fmt.Sprintf("v%d", i%7))
	}
	n, s := nb.NewArray(), sb.NewArray()
	nb.Release()
	sb.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{n, s}, 200)
	n.Release()
	s.Release()
	defer rec.Release()
	good := writeFile(t, sc, WriterOptions{Compression: CompressionNone}, rec)

	// In the footer (thrift compact), an i64 field following its
	// predecessor is 0x16 then the zigzag varint: 200 is 0x90 0x03. It
	// occurs as the file's num_rows, each column's num_values, and last
	// the row group's num_rows.
	footerLen := int(good[len(good)-8]) | int(good[len(good)-7])<<8 | int(good[len(good)-6])<<16
	footerAt := len(good) - 8 - footerLen
	pat := []byte{0x16, 0x90, 0x03}
	var at []int
	for i := footerAt; i < len(good)-8; {
		j := bytes.Index(good[i:len(good)-8], pat)
		if j < 0 {
			break
		}
		at = append(at, i+j)
		i += j + 1
	}
	if len(at) != 4 {
		t.Fatalf("found the row count %d times in the footer, want 4 (file, 2 columns, row group)", len(at))
	}
	patch := func(claim byte, where ...int) []byte {
		b := bytes.Clone(good)
		for _, k := range where {
			b[at[k]+1] = claim
		}
		return b
	}
	const c199, c201 = 0x8e, 0x92 // zigzag varints of 199 and 201 (second byte 0x03)
	files := []struct {
		name string
		b    []byte
	}{
		{"row group says 199", patch(c199, 3)},
		{"row group and file say 199", patch(c199, 0, 3)},
		{"row group says 201", patch(c201, 3)},
		{"row group and file say 201", patch(c201, 0, 3)},
	}
	reads := []struct {
		cols     []string
		parallel int
	}{{[]string{"n"}, 1}, {[]string{"s"}, 1}, {[]string{"n", "s"}, 2}, {[]string{"n", "s"}, 1}}
	for _, f := range files {
		for _, rd := range reads {
			t.Run(fmt.Sprintf("%s/%v/parallel=%d", f.name, rd.cols, rd.parallel), func(t *testing.T) {
				rows, err := readRows(f.b, mem, rd.cols, rd.parallel)
				if err == nil {
					t.Fatalf("read %d rows without an error", rows)
				}
				if rows > 199 && f.b[at[3]+1] == c199 {
					t.Errorf("served %d rows of a row group claiming 199", rows)
				}
			})
		}
	}
	if rows, err := readRows(good, mem, []string{"n", "s"}, 2); err != nil || rows != 200 {
		t.Fatalf("the unpatched file: %d rows, %v", rows, err)
	}
}

// readRows reads cols of the Parquet file b and counts the rows yielded
// before the first error.
func readRows(b []byte, mem memory.Allocator, cols []string, parallel int) (int64, error) {
	pf, err := OpenParquet(bytes.NewReader(b), int64(len(b)), ReadOptions{Allocator: mem, BatchRows: 64, Parallel: parallel})
	if err != nil {
		return 0, err
	}
	defer pf.Close()
	rr, err := pf.RecordsIn(context.Background(), cols, nil)
	if err != nil {
		return 0, err
	}
	defer rr.Release()
	var rows int64
	for rr.Next() {
		rows += rr.RecordBatch().NumRows()
	}
	return rows, rr.Err()
}
