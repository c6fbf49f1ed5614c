package flightserver

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestWriteSlicedBySize: a batch over the send target is cut where its
// rows' own bytes reach it, so a batch of many small rows followed by a
// few large ones (red team round 16's i01: 20,000 one-byte strings, then
// 200 of 100 KiB) goes out as messages under the limit, not as equal
// numbers of rows of 20 MiB; for every column type the slices carry every
// row once, in order.
func TestWriteSlicedBySize(t *testing.T) {
	mem := memory.NewGoAllocator()
	const small, big = 20_000, 200
	value := func(i int) string {
		if i < small {
			return "x"
		}
		return strings.Repeat(string(rune('a'+i%26)), 100<<10)
	}
	build := func(dt arrow.DataType) arrow.Array {
		b := array.NewBuilder(mem, dt)
		defer b.Release()
		for i := range small + big {
			switch b := b.(type) {
			case *array.StringBuilder:
				b.Append(value(i))
			case *array.LargeStringBuilder:
				b.Append(value(i))
			case *array.BinaryBuilder:
				b.Append([]byte(value(i)))
			case *array.ListBuilder:
				b.Append(true)
				vb := b.ValueBuilder().(*array.StringBuilder)
				vb.Append(value(i))
				vb.Append(value(i))
			case *array.StructBuilder:
				b.Append(true)
				b.FieldBuilder(0).(*array.Int64Builder).Append(int64(i))
				b.FieldBuilder(1).(*array.StringBuilder).Append(value(i))
			case *array.FixedSizeListBuilder:
				b.Append(true)
				vb := b.ValueBuilder().(*array.StringBuilder)
				vb.Append(value(i))
				vb.AppendNull()
			}
		}
		return b.NewArray()
	}
	types := []arrow.DataType{
		arrow.BinaryTypes.String,
		arrow.BinaryTypes.LargeString,
		arrow.BinaryTypes.Binary,
		arrow.ListOf(arrow.BinaryTypes.String),
		arrow.StructOf(arrow.Field{Name: "i", Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}),
		arrow.FixedSizeListOf(2, arrow.BinaryTypes.String),
	}
	s := &Server{opts: options{maxSend: 4 << 20}}
	target := s.sendTarget()
	for _, dt := range types {
		t.Run(dt.String(), func(t *testing.T) {
			col := build(dt)
			defer col.Release()
			ids := array.NewInt64Builder(mem)
			for i := range small + big {
				ids.Append(int64(i))
			}
			idCol := ids.NewArray()
			ids.Release()
			defer idCol.Release()
			sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: dt, Nullable: true}}, nil)
			full := array.NewRecordBatch(sc, []arrow.Array{idCol, col}, small+big)
			defer full.Release()
			// The read may hand over a slice itself: cut one off the front.
			rec := full.NewSlice(7, full.NumRows())
			defer rec.Release()
			var next int64 = 7
			var msgs int
			write := func(sl arrow.RecordBatch) error {
				msgs++
				pl, err := ipc.GetRecordBatchPayload(sl, ipc.WithAllocator(mem))
				if err != nil {
					return err
				}
				defer pl.Release()
				var buf bytes.Buffer
				if err := pl.SerializeBody(&buf); err != nil {
					return err
				}
				if body := int64(buf.Len()); body > target && sl.NumRows() > 1 {
					t.Errorf("a slice of %d rows from row %d: a message body of %d bytes, over the target %d", sl.NumRows(), next, body, target)
				}
				got := sl.Column(0).(*array.Int64)
				for i := range got.Len() {
					if got.Value(i) != next {
						t.Fatalf("row %d of the slices is id %d", next, got.Value(i))
					}
					next++
				}
				return nil
			}
			if err := s.writeSliced(write, rec, &rpcInfo{}); err != nil {
				t.Fatal(err)
			}
			if next != small+big {
				t.Fatalf("the slices carried rows up to %d of %d", next, small+big)
			}
			if msgs < 2 {
				t.Fatalf("%d message(s)", msgs)
			}
		})
	}
}
