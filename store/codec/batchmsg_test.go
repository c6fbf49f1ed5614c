package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
)

// ipcMessages is the messages (flatbuffer header, body) of an IPC stream
// of rec, dictionaries first.
func ipcMessages(t *testing.T, rec arrow.RecordBatch) (hdrs, bodies [][]byte) {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// The stream framing: 0xFFFFFFFF, the header's length, the header,
	// then the body of the length the header declares.
	b := buf.Bytes()
	for len(b) >= 8 {
		n := int(binary.LittleEndian.Uint32(b[4:]))
		if n == 0 {
			break // end of stream
		}
		hdr := b[8 : 8+n]
		msg := flatbuffers.Table{Bytes: hdr, Pos: flatbuffers.GetUOffsetT(hdr)}
		body := 0
		if o := flatbuffers.UOffsetT(msg.Offset(fbMessageBodyLength)); o != 0 {
			body = int(msg.GetInt64(o + msg.Pos))
		}
		hdrs = append(hdrs, bytes.Clone(hdr))
		bodies = append(bodies, bytes.Clone(b[8+n:8+n+body]))
		b = b[8+n+body:]
	}
	return hdrs, bodies
}

func TestCheckBatchBody(t *testing.T) {
	mem := memory.NewGoAllocator()
	ib := array.NewInt64Builder(mem)
	defer ib.Release()
	ib.AppendValues([]int64{1, 2, 3, 4, 5, 6, 7, 8}, nil)
	ints := ib.NewArray()
	defer ints.Release()
	db := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
	defer db.Release()
	for _, s := range []string{"alpha", "beta", "alpha", "gamma", "beta", "delta", "alpha", "epsilon"} {
		if err := db.AppendString(s); err != nil {
			t.Fatal(err)
		}
	}
	dict := db.NewArray()
	defer dict.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: "n", Type: ints.DataType()}, {Name: "s", Type: dict.DataType()}}, nil)
	rec := array.NewRecordBatch(sc, []arrow.Array{ints, dict}, 8)
	defer rec.Release()
	hdrs, bodies := ipcMessages(t, rec)
	if len(hdrs) != 3 { // schema, dictionary, batch
		t.Fatalf("%d messages", len(hdrs))
	}
	for i := range hdrs {
		if err := CheckBatchBody(hdrs[i], len(bodies[i])); err != nil {
			t.Fatalf("message %d as written: %v", i, err)
		}
	}
	for _, i := range []int{1, 2} { // the dictionary batch, the record batch
		for _, short := range []int{len(bodies[i]) - 1, len(bodies[i]) / 2, 0} {
			if err := CheckBatchBody(hdrs[i], short); !errors.Is(err, ErrBodyTooShort) {
				t.Fatalf("message %d with a body of %d of its %d bytes: %v, want ErrBodyTooShort", i, short, len(bodies[i]), err)
			}
		}
	}
	// Truncated or garbage headers are malformed, never a panic.
	for _, i := range []int{1, 2} {
		for n := range len(hdrs[i]) {
			err := CheckBatchBody(hdrs[i][:n], len(bodies[i]))
			if err != nil && !errors.Is(err, ErrMalformedMessage) && !errors.Is(err, ErrBodyTooShort) {
				t.Fatalf("header cut at %d: %v", n, err)
			}
		}
	}
}

func FuzzCheckBatchBody(f *testing.F) {
	f.Add([]byte{}, 0)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}, 10)
	f.Fuzz(func(t *testing.T, hdr []byte, n int) {
		_ = CheckBatchBody(hdr, n) // must not panic
	})
}
