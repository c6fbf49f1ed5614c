package flightserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// nestedStruct is a struct nested depth levels deep around an int8 (a
// column of it has depth depth+1).
func nestedStruct(depth int) arrow.DataType {
	var t arrow.DataType = arrow.PrimitiveTypes.Int8
	for i := 0; i < depth; i++ {
		t = arrow.StructOf(arrow.Field{Name: "n", Type: t, Nullable: true})
	}
	return t
}

func wideSchema(n int) *arrow.Schema {
	fs := make([]arrow.Field, n)
	for i := range fs {
		fs[i] = arrow.Field{Name: fmt.Sprintf("c%d", i), Type: arrow.PrimitiveTypes.Int8, Nullable: true}
	}
	return arrow.NewSchema(fs, nil)
}

// schemaPut sends a DoPut of just a schema (no batch) to path.
func schemaPut(t *testing.T, ts *testServer, path string, sc *arrow.Schema) (codes.Code, error) {
	msgs := streamOf(t, sc, nil)
	msgs[0].FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{path}}
	return sendPut(context.Background(), ts.c, msgs)
}

// TestSchemaLimits: a schema over --max-columns or --max-depth is refused
// ResourceExhausted naming the limit, before anything is written; one at
// the limits passes. A struct nested 60 000 deep is refused within a
// second of server time (it cost 35 s of CPU before the limit).
func TestSchemaLimits(t *testing.T) {
	ts := startSrv(t, true, WithMaxColumns(50), WithMaxDepth(6))
	for _, c := range []struct {
		name string
		sc   *arrow.Schema
		want codes.Code
		flag string
	}{
		{"50 columns", wideSchema(50), codes.OK, ""},
		{"51 columns", wideSchema(51), codes.ResourceExhausted, "--max-columns"},
		{"depth 6", arrow.NewSchema([]arrow.Field{{Name: "d", Type: nestedStruct(5), Nullable: true}}, nil), codes.OK, ""},
		{"depth 7", arrow.NewSchema([]arrow.Field{{Name: "d", Type: nestedStruct(6), Nullable: true}}, nil), codes.ResourceExhausted, "--max-depth"},
		{"list of structs too deep", arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(nestedStruct(5)), Nullable: true}}, nil), codes.ResourceExhausted, "--max-depth"},
		{"map counts its entries", arrow.NewSchema([]arrow.Field{{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, nestedStruct(4)), Nullable: true}}, nil), codes.ResourceExhausted, "--max-depth"},
		{"struct leaves count", arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.StructOf(wideSchema(51).Fields()...), Nullable: true}}, nil), codes.ResourceExhausted, "--max-columns"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := strings.ReplaceAll(c.name, " ", "_")
			code, err := schemaPut(t, ts, path, c.sc)
			if code != c.want || (c.flag != "" && !strings.Contains(err.Error(), c.flag)) {
				t.Fatalf("%v (%v), want %v naming %s", code, err, c.want, c.flag)
			}
			if c.want != codes.OK {
				if err := getErr(context.Background(), ts.c, path); status.Code(err) != codes.NotFound {
					t.Fatalf("a refused put left %s: %v", path, err)
				}
			}
		})
	}
	t.Run("60000 deep", func(t *testing.T) {
		sc := arrow.NewSchema([]arrow.Field{{Name: "d", Type: nestedStruct(60_000), Nullable: true}}, nil)
		msgs := streamOf(t, sc, nil)
		msgs[0].FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"deep"}}
		start := time.Now()
		code, err := sendPut(context.Background(), ts.c, msgs)
		if code != codes.ResourceExhausted || time.Since(start) > 2*time.Second {
			t.Fatalf("%v after %v: %v", code, time.Since(start), err)
		}
		if len(err.Error()) > 300 {
			t.Fatalf("the refusal formats the type: %d bytes", len(err.Error()))
		}
	})
}

// randomType builds a random nested type of at most depth levels.
func randomType(r *rand.Rand, depth int) arrow.DataType {
	if depth <= 1 || r.IntN(3) == 0 {
		switch r.IntN(4) {
		case 0:
			return arrow.PrimitiveTypes.Int64
		case 1:
			return arrow.BinaryTypes.String
		case 2:
			return &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
		default:
			return arrow.FixedWidthTypes.Boolean
		}
	}
	switch r.IntN(4) {
	case 0:
		return arrow.ListOf(randomType(r, depth-1))
	case 1:
		return arrow.MapOf(arrow.BinaryTypes.String, randomType(r, depth-2))
	case 2:
		return arrow.FixedSizeListOf(2, randomType(r, depth-1))
	default:
		n := 1 + r.IntN(4)
		fs := make([]arrow.Field, n)
		for i := range fs {
			fs[i] = arrow.Field{Name: fmt.Sprintf("f%d", i), Type: randomType(r, depth-1), Nullable: true}
		}
		return arrow.StructOf(fs...)
	}
}

// TestSchemaCheckAgrees: the check on the message bytes and the check on
// the parsed schema count the same leaves and depth, for random nested
// schemas with custom metadata, at and just below each count.
func TestSchemaCheckAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		n := 1 + r.IntN(5)
		fs := make([]arrow.Field, n)
		for j := range fs {
			md := arrow.NewMetadata([]string{"k"}, []string{"v"})
			fs[j] = arrow.Field{Name: fmt.Sprintf("c%d", j), Type: randomType(r, 6), Nullable: true, Metadata: md}
		}
		md := arrow.NewMetadata([]string{"a", "b"}, []string{"1", "2"})
		sc := arrow.NewSchema(fs, &md)
		hdr := streamOf(t, sc, nil)[0].DataHeader
		leaves, depth := schemaShape(sc, 1<<30, 1<<30)
		for _, lim := range [][2]int{{leaves, depth}, {leaves - 1, depth}, {leaves, depth - 1}} {
			s := &Server{opts: options{maxColumns: lim[0], maxDepth: lim[1]}}
			raw := status.Code(s.checkSchemaMessage(hdr))
			parsed := status.Code(s.checkSchema(sc))
			want := codes.OK
			if lim[0] < leaves || lim[1] < depth {
				want = codes.ResourceExhausted
			}
			if raw != want || parsed != want {
				t.Fatalf("schema %d (%d leaves, depth %d), limits %v: bytes %v, parsed %v, want %v", i, leaves, depth, lim, raw, parsed, want)
			}
		}
	}
}

// TestInflightBudget: receives reserve the largest message from their
// pool. Two DoPuts waiting for their next batch fill a data pool of two
// messages while they hold their reservations (a receive on a silent
// connection gives it back after a while, here an hour: that is
// TestPausedPutsDoNotHoldBudget's; TestBudgetHeldMidMessage fills the pool
// with messages under way): a third put waits, then fails
// ResourceExhausted naming the flag, while reads (the request pool) go on.
// When one stalled put ends, puts go through again, and everything is
// released at the end.
func TestInflightBudget(t *testing.T) {
	ts := startSrv(t, true, WithMaxRecvMsgSize(1<<20), WithMaxInflightBytes(2<<20), WithInflightWait(300*time.Millisecond),
		withDormantAfter(time.Hour))
	rec := strBatch(10, 10)
	defer rec.Release()
	if err := putErr(context.Background(), ts.c, []string{"r"}, rec); err != nil {
		t.Fatal(err)
	}
	var cancels []context.CancelFunc
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		stream, err := ts.c.DoPut(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
		w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{fmt.Sprintf("stalled%d", i)}})
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		// No more batches, no close: the server waits for the next one.
	}
	deadline := time.Now().Add(5 * time.Second)
	for ts.srv.budget.used.Load() != 2<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("data pool holds %d bytes, want %d", ts.srv.budget.used.Load(), 2<<20)
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	err := putErr(context.Background(), ts.c, []string{"third"}, rec)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-inflight-bytes") || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("third put after %v: %v", time.Since(start), err)
	}
	if err := getErr(context.Background(), ts.c, "r"); err != nil {
		t.Fatalf("a read while the data pool is full: %v", err)
	}
	if n := metricValue(t, ts.srv.metrics.inflightRefusals.WithLabelValues("data")); n != 1 {
		t.Fatalf("refusals %v", n)
	}
	cancels[0]()
	if err := putErr(context.Background(), ts.c, []string{"fourth"}, rec); err != nil {
		t.Fatalf("a put after a stalled one ended: %v", err)
	}
	cancels[1]()
	deadline = time.Now().Add(5 * time.Second)
	for ts.srv.budget.used.Load() != 0 || ts.srv.reqBudget.used.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pools hold %d and %d bytes after every RPC ended", ts.srv.budget.used.Load(), ts.srv.reqBudget.used.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSendTimeout: a DoGet whose client never reads is cancelled after the
// send timeout, and what it held is freed (the checked allocator ends at
// zero).
func TestSendTimeout(t *testing.T) {
	var logs syncBuffer
	ts := startSrv(t, true, WithSendTimeout(300*time.Millisecond), WithMaxSendMsgSize(64<<10), WithLogger(zerolog.New(&logs)))
	rec := strBatch(2000, 1000)
	defer rec.Release()
	if err := putErr(context.Background(), ts.c, []string{"big"}, rec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := ts.c.DoGet(ctx, &flight.Ticket{Ticket: []byte("big")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for metricValue(t, ts.srv.metrics.sendIdle) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no send timeout; log:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for !strings.Contains(logs.String(), `"status":"DeadlineExceeded"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the DoGet did not end; log:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLogBytes: the bytes of a DoGet's log line are the bytes of the IPC
// messages it sent (metadata and body), as the client counts them; a
// DoPut's are those it received.
func TestLogBytes(t *testing.T) {
	var logs syncBuffer
	ts := startSrv(t, true, WithMaxSendMsgSize(64<<10), WithLogger(zerolog.New(&logs)))
	rec := strBatch(500, 300)
	defer rec.Release()
	var sent collector
	w := flight.NewRecordWriter(&sent, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	var putBytes int64
	for _, m := range sent.msgs {
		putBytes += int64(len(m.DataHeader) + len(m.DataBody))
	}
	if err := putErr(context.Background(), ts.c, []string{"p"}, rec); err != nil {
		t.Fatal(err)
	}
	stream, err := ts.c.DoGet(context.Background(), &flight.Ticket{Ticket: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	var got, msgs int64
	for {
		d, err := stream.Recv()
		if err != nil {
			break
		}
		got += int64(len(d.DataHeader) + len(d.DataBody))
		msgs++
	}
	if msgs < 3 {
		t.Fatalf("%d messages: not sliced", msgs)
	}
	lines := map[string]int64{}
	deadline := time.Now().Add(5 * time.Second)
	for len(lines) < 2 && time.Now().Before(deadline) {
		for _, l := range strings.Split(logs.String(), "\n") {
			var v struct {
				Method string `json:"method"`
				Bytes  int64  `json:"bytes"`
			}
			if json.Unmarshal([]byte(l), &v) == nil && v.Method != "" {
				lines[v.Method] = v.Bytes
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if lines["DoGet"] != got || lines["DoPut"] != putBytes {
		t.Fatalf("log bytes %v; the client received %d, sent %d", lines, got, putBytes)
	}
}
