package flightserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/quiverdb/quiver/internal/quivertest"
)

// grpcFrame is msg behind gRPC's 5-byte prefix (uncompressed).
func grpcFrame(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// rawCall sends one call of method ("DoGet") over its own HTTP/2
// connection, as a client that writes arbitrary bytes would: the parts go
// in DATA frames, the last with END_STREAM (none: the HEADERS frame ends
// the stream), with pause after the first. It returns the grpc-status and
// grpc-message the server answered.
func rawCall(t *testing.T, addr, method string, parts [][]byte, pause time.Duration) (codes.Code, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/arrow.flight.protocol.FlightService/" + method},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	const id = 1
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: len(parts) == 0}); err != nil {
		t.Fatal(err)
	}
	for i, p := range parts {
		if err := fr.WriteData(id, i == len(parts)-1, p); err != nil {
			t.Fatal(err)
		}
		if i == 0 && pause > 0 {
			time.Sleep(pause)
		}
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("%s: no status before the connection failed: %v", method, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if err := fr.WritePing(true, f.Data); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("%s: stream reset (%v) without a status", method, f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("%s: connection closed (%v) without a status", method, f.ErrCode)
		case *http2.MetaHeadersFrame:
			if s := f.PseudoValue("status"); s != "" && s != "200" {
				t.Fatalf("%s: HTTP status %s", method, s)
			}
			hdr := map[string]string{}
			for _, hf := range f.RegularFields() {
				hdr[hf.Name] = hf.Value
			}
			if v := hdr["grpc-status"]; v != "" {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("%s: grpc-status %q", method, v)
				}
				return codes.Code(n), hdr["grpc-message"]
			}
		}
	}
}

// putMessages is the encoded FlightData messages of a put of rec to path
// p/x: the schema message (with the descriptor), then the batch.
func putMessages(t *testing.T, rec arrow.RecordBatch) [][]byte {
	t.Helper()
	var cw captureWriter
	w := flight.NewRecordWriter(&cw)
	w.SetFlightDescriptor(quivertest.PathDesc("p", "x"))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return cw.msgs
}

// captureWriter keeps the messages a flight.Writer sends, encoded.
type captureWriter struct{ msgs [][]byte }

// Send implements flight.DataStreamWriter.
func (c *captureWriter) Send(fd *flight.FlightData) error {
	b, err := proto.Marshal(fd)
	c.msgs = append(c.msgs, b)
	return err
}

// serverCode waits until the server counted one more call of method with
// code than before (the count comes after the handler returned, which may
// be after the client has its status).
func serverCode(t *testing.T, s *Server, method string, code codes.Code, before float64) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ; {
		if metricValue(t, s.metrics.rpcs.WithLabelValues(method, code.String())) > before {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s: the server did not count the call as %v", method, code)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMalformedRequestsInvalidArgument: a request the client got wrong is
// INVALID_ARGUMENT for every RPC, never INTERNAL (red team round 24's
// y02): a request that is not valid protobuf (the codec reports it to the
// handler, not to grpc-go), a call with no request or with two (each
// single-request method is registered as a client stream and checks this
// itself: grpc-go's check answers INTERNAL "cardinality violation"), and
// a message the client's half-close cuts off. The last is answered on
// the wire by grpc-go itself, INTERNAL "unexpected EOF", before any
// interceptor or handler sees the error (serverStream.RecvMsg writes the
// status of a failed receive before it returns): the server counts and
// logs it as INVALID_ARGUMENT, so the alert on Internal does not fire
// (docs/protocol.md "Errors"). Nothing is committed by a cut put.
func TestMalformedRequestsInvalidArgument(t *testing.T) {
	ts := startSrv(t, true)
	cut := []byte{0, 0, 0, 0, 16, 'a', 'b', 'c'} // promises 16 bytes, sends 3
	type call struct {
		name  string
		parts [][]byte
		pause time.Duration
		// wire is the status the client gets; the server always counts
		// INVALID_ARGUMENT.
		wire codes.Code
	}
	single := []call{
		{"not protobuf", [][]byte{grpcFrame([]byte{0xff, 0xff, 0xff})}, 0, codes.InvalidArgument},
		{"no request", nil, 0, codes.InvalidArgument},
		{"two requests", [][]byte{append(grpcFrame(nil), grpcFrame(nil)...)}, 0, codes.InvalidArgument},
		{"cut off", [][]byte{cut}, 0, codes.Internal},
		{"cut in its prefix", [][]byte{{0, 0, 0}}, 0, codes.Internal},
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	msgs := putMessages(t, rec)
	first, batch := grpcFrame(msgs[0]), grpcFrame(msgs[1])
	tests := map[string][]call{
		"DoPut": {
			{"first message cut", [][]byte{first[:10]}, 0, codes.Internal},
			{"batch cut after its prefix", [][]byte{first, batch[:5]}, 0, codes.Internal},
			{"batch cut 1 byte short", [][]byte{first, batch[:len(batch)-1]}, 0, codes.Internal},
			{"batch cut 1 byte short after a pause", [][]byte{first, batch[:len(batch)-1]}, 300 * time.Millisecond, codes.Internal},
		},
	}
	for _, m := range []string{"DoGet", "DoAction", "GetFlightInfo", "GetSchema", "ListFlights", "ListActions", "PollFlightInfo"} {
		tests[m] = single
	}
	for method, calls := range tests {
		for _, c := range calls {
			t.Run(method+"/"+c.name, func(t *testing.T) {
				before := metricValue(t, ts.srv.metrics.rpcs.WithLabelValues(method, codes.InvalidArgument.String()))
				code, msg := rawCall(t, ts.addr, method, c.parts, c.pause)
				if code != c.wire {
					t.Fatalf("answered %v %q, want %v", code, msg, c.wire)
				}
				if code == codes.Internal && msg != "unexpected EOF" {
					// Only grpc-go's own answer to a cut message may be
					// INTERNAL; should it change, so must protocol.md.
					t.Fatalf("answered %v %q, want grpc-go's INTERNAL \"unexpected EOF\"", code, msg)
				}
				serverCode(t, ts.srv, method, codes.InvalidArgument, before)
				if n := metricValue(t, ts.srv.metrics.rpcs.WithLabelValues(method, codes.Internal.String())); n != 0 {
					t.Fatalf("the server counted %v Internal calls of %s", n, method)
				}
			})
		}
	}
	if _, err := ts.c.GetSchema(context.Background(), quivertest.PathDesc("p", "x")); status.Code(err) != codes.NotFound {
		t.Fatalf("after the cut puts, p/x: %v, want NotFound (nothing committed)", err)
	}
}

// TestDecodeStreamRecvError: recvError makes grpc-go's report of a cut
// message INVALID_ARGUMENT and leaves every other error as it is.
func TestDecodeStreamRecvError(t *testing.T) {
	for _, tc := range []struct {
		in   error
		want codes.Code
	}{
		{status.Error(codes.Internal, "unexpected EOF"), codes.InvalidArgument},
		{status.Error(codes.Internal, "internal error"), codes.Internal},
		{status.Error(codes.ResourceExhausted, "grpc: received message larger than max (9 vs. 8)"), codes.ResourceExhausted},
		{status.Error(codes.Canceled, "context canceled"), codes.Canceled},
		{errors.New("unexpected EOF"), codes.Unknown},
	} {
		if got := status.Code(recvError(tc.in)); got != tc.want {
			t.Errorf("recvError(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestSingleRequestStaysCharged: the one request of a single-request
// method stays charged to the request pool while the handler runs, as when
// grpc-go read it and the end of the stream in one receive (decodeStream
// does both in one RecvMsg of the in-flight interceptor's).
func TestSingleRequestStaysCharged(t *testing.T) {
	var used atomic.Int64
	used.Store(-1)
	var srv atomic.Pointer[Server]
	ts := startSrv(t, true, withTestHook(func(point string) {
		if point == "GetFlightInfo" {
			used.Store(srv.Load().reqBudget.used.Load())
		}
	}))
	srv.Store(ts.srv)
	desc := quivertest.PathDesc("p", string(bytes.Repeat([]byte("k"), 200)))
	_, err := ts.c.GetFlightInfo(context.Background(), desc)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("GetFlightInfo: %v, want NotFound", err)
	}
	if want := int64(proto.Size(desc)); used.Load() != want {
		t.Fatalf("while the handler ran, the request pool held %d bytes, want the request's %d", used.Load(), want)
	}
}
