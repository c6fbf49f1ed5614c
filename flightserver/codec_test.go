package flightserver

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/quiverdb/quiver/internal/flightwire"
)

// sameFlightData reports whether two decoded messages carry the same
// fields (an empty bytes field equals an absent one, as for every reader).
func sameFlightData(a, b *flight.FlightData) bool {
	return bytes.Equal(a.DataHeader, b.DataHeader) && bytes.Equal(a.DataBody, b.DataBody) &&
		bytes.Equal(a.AppMetadata, b.AppMetadata) && proto.Equal(a.FlightDescriptor, b.FlightDescriptor)
}

func TestFlightCodecUnmarshal(t *testing.T) {
	big := bytes.Repeat([]byte{7, 1, 2}, aliasMin)
	desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"path":"a/b"}`)}
	cases := []struct {
		name string
		msg  *flight.FlightData
	}{
		{"large body", &flight.FlightData{DataHeader: []byte("hdr"), DataBody: big, AppMetadata: []byte("m")}},
		{"large body and descriptor", &flight.FlightData{FlightDescriptor: desc, DataHeader: []byte("h"), DataBody: big}},
		{"small", &flight.FlightData{DataHeader: []byte("h"), DataBody: []byte("b")}},
	}
	c := newFlightCodec()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			// As gRPC hands it over: in several chunks.
			var data mem.BufferSlice
			for len(b) > 0 {
				n := min(len(b), 16<<10)
				data = append(data, mem.SliceBuffer(b[:n]))
				b = b[n:]
			}
			var got flight.FlightData
			if err := c.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			if !sameFlightData(&got, tc.msg) {
				t.Fatalf("decoded %v, want %v", &got, tc.msg)
			}
		})
	}
	// Other messages take the proto codec.
	pr := &flight.PutResult{AppMetadata: big}
	b, _ := proto.Marshal(pr)
	var got flight.PutResult
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got); err != nil || !bytes.Equal(got.AppMetadata, big) {
		t.Fatalf("PutResult: %v", err)
	}
}

// FuzzUnmarshalFlightData: on any bytes a client may send, the aliasing
// decoder agrees with proto.Unmarshal: both fail, or both give the same
// fields.
func FuzzUnmarshalFlightData(f *testing.F) {
	for _, m := range []*flight.FlightData{
		{DataHeader: []byte("h"), DataBody: []byte("body"), AppMetadata: []byte("m")},
		{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"a", "b"}}, DataBody: []byte{1}},
		{},
	} {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x02, 0x10})                  // a descriptor with a truncated field
	f.Add([]byte{0x12, 0x05, 'a'})                   // a header longer than the message
	f.Add([]byte{0x13, 0x14})                        // a group
	f.Add([]byte{0xc2, 0x3e, 0x01, 'x', 0x10, 0x01}) // body, then field 2 as a varint
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got flight.FlightData
		werr := proto.Unmarshal(b, &want)
		gerr := unmarshalFlightData(b, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("proto.Unmarshal: %v; unmarshalFlightData: %v", werr, gerr)
		}
		if gerr != nil && !errors.Is(gerr, errFlightData) {
			t.Fatalf("error %v does not wrap errFlightData", gerr)
		}
		if werr == nil && !sameFlightData(&got, &want) {
			t.Fatalf("decoded %v, proto.Unmarshal %v", &got, &want)
		}
	})
}

// TestFlightCodecFieldsEndAtTheirLength: the fields decoded by aliasing
// the message have no capacity past their length, so that a reader
// slicing past a body's end fails instead of reading the fields that
// follow it in the message (red team round 17's j02: app_metadata after
// data_body).
func TestFlightCodecFieldsEndAtTheirLength(t *testing.T) {
	var b []byte
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("header"))
	b = protowire.AppendTag(b, 1000, protowire.BytesType)
	b = protowire.AppendBytes(b, bytes.Repeat([]byte{1}, aliasMin))
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendBytes(b, bytes.Repeat([]byte{0xEE}, 64))
	var got flight.FlightData
	if err := newFlightCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string][]byte{"data_header": got.DataHeader, "data_body": got.DataBody, "app_metadata": got.AppMetadata} {
		if cap(f) != len(f) {
			t.Errorf("%s: capacity %d past its length %d", name, cap(f), len(f))
		}
	}
}

// TestFlightCodecMalformedMarked: a FlightData that does not decode, small
// (protobuf's decoder) or large (the aliasing one), is handed over marked
// rather than failed (gRPC would answer INTERNAL at once, before the put
// cleaned up: red team round 17's j03, j05); the stream refuses it as
// INVALID_ARGUMENT. A client's header can never pass for the mark.
func TestFlightCodecMalformedMarked(t *testing.T) {
	c := newFlightCodec()
	truncated := func(n int) []byte {
		var b []byte
		b = protowire.AppendTag(b, 1000, protowire.BytesType)
		b = protowire.AppendBytes(b, bytes.Repeat([]byte{1}, n))
		return append(b, 0x10, 0xff) // field 2 as a varint, cut short
	}
	for name, b := range map[string][]byte{"small": truncated(10), "large": truncated(aliasMin + 10), "reserved wire type": {0x17}} {
		var fd flight.FlightData
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &fd); err != nil {
			t.Fatalf("%s: Unmarshal failed (gRPC would answer it itself): %v", name, err)
		}
		err := malformedFlightData(&fd)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "malformed FlightData message") {
			t.Fatalf("%s: %v, want INVALID_ARGUMENT naming a malformed FlightData message", name, err)
		}
	}
	for _, hdr := range [][]byte{{0}, nil, []byte("x")} {
		if err := malformedFlightData(&flight.FlightData{DataHeader: hdr}); err != nil {
			t.Fatalf("header %q taken for the mark: %v", hdr, err)
		}
	}
}

// The decoding the server's codec shares with the client's (flightwire),
// by the names these tests were written with.
var (
	errFlightData       = flightwire.ErrMalformed
	unmarshalFlightData = flightwire.Unmarshal
)

const aliasMin = flightwire.AliasMin
