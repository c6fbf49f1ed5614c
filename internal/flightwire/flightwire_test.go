package flightwire

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"
)

func message(body int) *flight.FlightData {
	return &flight.FlightData{
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"path":"a/b"}`)},
		DataHeader:       bytes.Repeat([]byte{3}, 200),
		AppMetadata:      []byte("meta"),
		DataBody:         bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, body/7),
	}
}

// TestCodecMarshal: every size marshals to protobuf's bytes, also into a
// reused buffer that held a longer message, and a message between
// AliasMin and 1 MiB lies in a buffer less than twice its size
// (grpc-go's codec gives it a 1 MiB pooled buffer it zeroes whole).
func TestCodecMarshal(t *testing.T) {
	c := NewCodec()
	for _, body := range []int{0, 100, 2 << 10, 32 << 10, 60 << 10, 40 << 10, 900 << 10, 600 << 10, 1<<20 - 400, 2 << 20} {
		m := message(body)
		want, err := protobuf.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := c.Marshal(m)
		if err != nil {
			t.Fatalf("body %d: %v", body, err)
		}
		got := bs.Materialize()
		if !bytes.Equal(got, want) {
			t.Fatalf("body %d: marshalled %d bytes, not protobuf's %d", body, len(got), len(want))
		}
		if n := len(want); n >= AliasMin && n < pooledMin {
			if len(bs) != 1 || cap(bs[0].ReadOnlyData()) > 2*n {
				t.Fatalf("body %d: a %d-byte message marshalled into %d buffers, the first of capacity %d", body, n, len(bs), cap(bs[0].ReadOnlyData()))
			}
		}
		bs.Free()
	}
	if _, err := c.Marshal("not a message"); err == nil {
		t.Fatal("a string marshalled")
	}
}

// TestCodecUnmarshal: a batch decodes as protobuf decodes it, its fields
// aliasing one buffer with no room past their ends; a small one and
// other messages take protobuf's path.
func TestCodecUnmarshal(t *testing.T) {
	c := NewCodec()
	for _, body := range []int{0, 100, 40 << 10, 2 << 20} {
		m := message(body)
		b, err := protobuf.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		// Split as gRPC hands a message over: in frames.
		var data mem.BufferSlice
		for len(b) > 0 {
			k := min(len(b), 16<<10)
			data = append(data, mem.SliceBuffer(b[:k]))
			b = b[k:]
		}
		var got flight.FlightData
		if err := c.Unmarshal(data, &got); err != nil {
			t.Fatalf("body %d: %v", body, err)
		}
		if !protobuf.Equal(&got, m) {
			t.Fatalf("body %d: decoded message differs", body)
		}
		if body >= AliasMin && (cap(got.DataBody) != len(got.DataBody) || cap(got.DataHeader) != len(got.DataHeader)) {
			t.Fatalf("body %d: fields have room past their ends", body)
		}
	}
	var d flight.FlightDescriptor
	b, _ := protobuf.Marshal(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"x"}})
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &d); err != nil || d.Path[0] != "x" {
		t.Fatalf("descriptor: %v %v", err, d.Path)
	}
	var fd flight.FlightData
	bad := append([]byte{0xc2, 0x3e, 0xff, 0xff, 0xff, 0x0f}, make([]byte, AliasMin)...) // body longer than the message
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(bad)}, &fd); err == nil {
		t.Fatal("a truncated batch decoded")
	}
}
