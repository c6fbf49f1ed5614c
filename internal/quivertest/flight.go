package quivertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/quiverdb/quiver/catalog"
)

// Server is what ServeInProcess serves: a flightserver.Server.
type Server interface {
	Serve(lis net.Listener) error
	Stop(ctx context.Context) bool
}

// ServeOption changes what ServeInProcess checks.
type ServeOption func(*serveOpts)

type serveOpts struct{ graceful bool }

// Graceful makes ServeInProcess want the stop at the end graceful (every
// call finished within the grace period).
func Graceful() ServeOption { return func(o *serveOpts) { o.graceful = true } }

// ServeInProcess serves srv on a free loopback port until tb's test ends
// and returns its address. At the end it stops srv (5 s grace) and wants
// Serve to have returned nil. Checks that must follow the stop (an
// allocator back to zero) belong in a Cleanup registered before the call.
func ServeInProcess(tb testing.TB, srv Server, opts ...ServeOption) string {
	tb.Helper()
	var o serveOpts
	for _, opt := range opts {
		opt(&o)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if !srv.Stop(ctx) && o.graceful {
			tb.Error("stop was not graceful")
		}
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// Dial connects a raw Flight client to addr without TLS, accepting
// messages up to 64 MiB (more with opts).
func Dial(addr string, opts ...grpc.DialOption) (flight.Client, error) {
	return flight.NewClientWithMiddleware(addr, nil, nil, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)),
	}, opts...)...)
}

// MustDial is Dial that fails tb and closes the client when its test
// ends.
func MustDial(tb testing.TB, addr string, opts ...grpc.DialOption) flight.Client {
	tb.Helper()
	c, err := Dial(addr, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// CmdDesc is a CMD descriptor holding v as JSON.
func CmdDesc(v any) *flight.FlightDescriptor {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b}
}

// PathDesc is a PATH descriptor of keys.
func PathDesc(keys ...string) *flight.FlightDescriptor {
	return &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: keys}
}

// Put sends recs (of schema sc) as one DoPut to desc as it is, one message
// a batch, and returns the one PutResult the server answers with; more
// than one is an error. It is for what the client package would not send
// (another descriptor's form, malformed input, a batch in one message
// whatever its size), and for flightserver's own tests.
func Put(ctx context.Context, c flight.Client, desc *flight.FlightDescriptor, sc *arrow.Schema, recs ...arrow.RecordBatch) (*catalog.PutResult, error) {
	raw, err := putRaw(ctx, c, desc, sc, recs...)
	if err != nil {
		return nil, err
	}
	var pr catalog.PutResult
	if err := json.Unmarshal(raw, &pr); err != nil {
		return nil, fmt.Errorf("app_metadata %q: %w", raw, err)
	}
	return &pr, nil
}

// putRaw is Put returning the PutResult's bytes as sent (app_metadata).
func putRaw(ctx context.Context, c flight.Client, desc *flight.FlightDescriptor, sc *arrow.Schema, recs ...arrow.RecordBatch) ([]byte, error) {
	stream, err := c.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(sc))
	w.SetFlightDescriptor(desc)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			break // the server's error comes with Recv
		}
	}
	_ = w.Close()
	_ = stream.CloseSend()
	res, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errors.New("more than one PutResult")
		}
		return res.AppMetadata, fmt.Errorf("after the PutResult: %w", err)
	}
	return res.AppMetadata, nil
}

// Action runs a DoAction with body as JSON (a []byte is sent as it is,
// nil as no body) and returns the bodies of its results.
func Action(ctx context.Context, c flight.Client, typ string, body any) ([][]byte, error) {
	b, ok := body.([]byte)
	if !ok && body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	stream, err := c.DoAction(ctx, &flight.Action{Type: typ, Body: b})
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r.Body)
	}
}
