package flightserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/quiverdb/quiver/store"
)

// The fuzz input of FuzzDoPut is a sequence of FlightData messages, each
// framed as u32le header length, header (an IPC flatbuffer Message),
// u32le body length, body. A length past the end of the input is cut to
// what remains. The first message gets the put's descriptor.
const maxFuzzMessages = 64

func decodeFrames(b []byte) []*flight.FlightData {
	var out []*flight.FlightData
	take := func() []byte {
		if len(b) < 4 {
			b = nil
			return nil
		}
		n := int(binary.LittleEndian.Uint32(b))
		b = b[4:]
		n = min(n, len(b))
		v := b[:n]
		b = b[n:]
		return v
	}
	for len(b) > 0 && len(out) < maxFuzzMessages {
		hdr := take()
		body := take()
		out = append(out, &flight.FlightData{DataHeader: hdr, DataBody: body})
	}
	return out
}

func encodeFrames(msgs []*flight.FlightData) []byte {
	var out []byte
	for _, m := range msgs {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(m.DataHeader)))
		out = append(out, m.DataHeader...)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(m.DataBody)))
		out = append(out, m.DataBody...)
	}
	return out
}

// collector is a flight.DataStreamWriter that keeps what a writer sends.
type collector struct{ msgs []*flight.FlightData }

func (c *collector) Send(d *flight.FlightData) error {
	c.msgs = append(c.msgs, &flight.FlightData{DataHeader: append([]byte(nil), d.DataHeader...), DataBody: append([]byte(nil), d.DataBody...)})
	return nil
}

// streamOf is the FlightData messages of recs written as one stream.
func streamOf(t testing.TB, sc *arrow.Schema, recs []arrow.RecordBatch, opts ...ipc.Option) []*flight.FlightData {
	t.Helper()
	var c collector
	w := flight.NewRecordWriter(&c, append([]ipc.Option{ipc.WithSchema(sc)}, opts...)...)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return c.msgs
}

// fuzzSeeds are valid streams of several types, and the known bad ones:
// string offsets that go backwards (passed the IPC reader and panicked in
// the Parquet writer), a compressed buffer claiming a 1 TiB uncompressed
// size, a schema over the column limit and one over the depth limit.
func fuzzSeeds(t testing.TB) map[string][]byte {
	mem := memory.NewGoAllocator()
	seeds := map[string][]byte{}
	build := func(sc *arrow.Schema, n int, fill func(b *array.RecordBuilder, i int)) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		for i := 0; i < n; i++ {
			fill(b, i)
		}
		return b.NewRecordBatch()
	}
	add := func(name string, sc *arrow.Schema, recs []arrow.RecordBatch, opts ...ipc.Option) []*flight.FlightData {
		msgs := streamOf(t, sc, recs, opts...)
		seeds[name] = encodeFrames(msgs)
		for _, r := range recs {
			r.Release()
		}
		return msgs
	}

	prim := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
	}, nil)
	fillPrim := func(b *array.RecordBuilder, i int) {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%3 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Float64Builder).Append(float64(i) / 3)
		}
		b.Field(2).(*array.BooleanBuilder).Append(i%2 == 0)
		b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(i * 1000))
	}
	add("primitives", prim, []arrow.RecordBatch{build(prim, 5, fillPrim)})
	add("two-batches", prim, []arrow.RecordBatch{build(prim, 3, fillPrim), build(prim, 4, fillPrim)})

	// A batch whose body is 8 bytes shorter than its buffers declare: the
	// IPC reader read past the body (zeros, or for a message of 32 KiB and
	// more the message's next fields: red team round 17's j02). Small and
	// large (aliased) messages.
	for name, rows := range map[string]int{"short-body": 5, "short-body-large": 4096} {
		msgs := streamOf(t, prim, []arrow.RecordBatch{build(prim, rows, fillPrim)})
		cut := make([]*flight.FlightData, len(msgs))
		for i, m := range msgs {
			cut[i] = &flight.FlightData{DataHeader: m.DataHeader, DataBody: m.DataBody}
		}
		cut[1].DataBody = cut[1].DataBody[:len(cut[1].DataBody)-64]
		seeds[name] = encodeFrames(cut)
	}

	str := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	fillStr := func(b *array.RecordBuilder, i int) {
		b.Field(0).(*array.StringBuilder).Append(strings.Repeat(string(rune('a'+i)), 3))
	}
	msgs := add("strings", str, []arrow.RecordBatch{build(str, 3, fillStr)})
	// The known crasher: offsets 0,3,6,9 become 0,6,3,9.
	bad := make([]*flight.FlightData, len(msgs))
	for i, m := range msgs {
		bad[i] = &flight.FlightData{DataHeader: m.DataHeader, DataBody: append([]byte(nil), m.DataBody...)}
	}
	body := bad[1].DataBody
	if binary.LittleEndian.Uint32(body[4:]) != 3 || binary.LittleEndian.Uint32(body[8:]) != 6 {
		t.Fatalf("unexpected string body layout % x", body[:16])
	}
	binary.LittleEndian.PutUint32(body[4:], 6)
	binary.LittleEndian.PutUint32(body[8:], 3)
	seeds["crasher-string-offsets-backwards"] = encodeFrames(bad)

	nested := arrow.NewSchema([]arrow.Field{
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	}, nil)
	add("nested", nested, []arrow.RecordBatch{build(nested, 4, func(b *array.RecordBuilder, i int) {
		sb := b.Field(0).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i))
		sb.FieldBuilder(1).(*array.StringBuilder).Append("v")
		lb := b.Field(1).(*array.ListBuilder)
		lb.Append(true)
		for j := 0; j <= i; j++ {
			lb.ValueBuilder().(*array.Int64Builder).Append(int64(j))
		}
	})})

	dict := arrow.NewSchema([]arrow.Field{{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, Nullable: true}}, nil)
	add("dictionary", dict, []arrow.RecordBatch{build(dict, 6, func(b *array.RecordBuilder, i int) {
		_ = b.Field(0).(*array.BinaryDictionaryBuilder).AppendString([]string{"x", "y", "z"}[i%3])
	})})

	zmsgs := add("zstd", prim, []arrow.RecordBatch{build(prim, 64, fillPrim)}, ipc.WithZstd())
	// A compressed buffer claiming to decompress to 1 TiB.
	bomb := make([]*flight.FlightData, len(zmsgs))
	for i, m := range zmsgs {
		bomb[i] = &flight.FlightData{DataHeader: m.DataHeader, DataBody: append([]byte(nil), m.DataBody...)}
	}
	binary.LittleEndian.PutUint64(bomb[1].DataBody, 1<<40)
	seeds["bomb-compressed-1TiB"] = encodeFrames(bomb)

	// Null columns, as pyarrow sends them (arrow-go's reader gives them no
	// buffer, which its validator must not take for a malformed array).
	nullish := arrow.NewSchema([]arrow.Field{
		{Name: "n", Type: arrow.Null, Nullable: true},
		{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "n", Type: arrow.Null, Nullable: true}, arrow.Field{Name: "i", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.Null), Nullable: true},
	}, nil)
	add("null-columns", nullish, []arrow.RecordBatch{build(nullish, 3, func(b *array.RecordBuilder, i int) {
		b.Field(0).AppendNull()
		sb := b.Field(1).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).AppendNull()
		sb.FieldBuilder(1).(*array.Int32Builder).Append(int32(i))
		lb := b.Field(2).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().AppendNull()
	})})

	// A null column claiming 2^40 rows: it validates (no buffers), and
	// the Parquet writer would build levels for every row.
	nulls := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.Null, Nullable: true}}, nil)
	nullCol := array.NewNull(1 << 40)
	add("null-rows-2^40", nulls, []arrow.RecordBatch{array.NewRecordBatch(nulls, []arrow.Array{nullCol}, 1<<40)})
	nullCol.Release()

	wide := make([]arrow.Field, fuzzMaxColumns+1)
	for i := range wide {
		wide[i] = arrow.Field{Name: fmt.Sprintf("c%d", i), Type: arrow.PrimitiveTypes.Int8}
	}
	seeds["too-many-columns"] = encodeFrames(streamOf(t, arrow.NewSchema(wide, nil), nil)[:1])
	var deep arrow.DataType = arrow.PrimitiveTypes.Int8
	for i := 0; i < fuzzMaxDepth; i++ {
		deep = arrow.StructOf(arrow.Field{Name: "n", Type: deep, Nullable: true})
	}
	seeds["too-deep"] = encodeFrames(streamOf(t, arrow.NewSchema([]arrow.Field{{Name: "d", Type: deep, Nullable: true}}, nil), nil)[:1])
	return seeds
}

// Limits of the fuzzed server: small, so the limits are reachable.
const (
	fuzzMaxColumns = 64
	fuzzMaxDepth   = 8
)

// TestWriteDoPutSeeds regenerates testdata/fuzz/FuzzDoPut (set
// QUIVER_WRITE_FUZZ_SEEDS=1).
func TestWriteDoPutSeeds(t *testing.T) {
	if os.Getenv("QUIVER_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set QUIVER_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz/FuzzDoPut")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDoPut")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range fuzzSeeds(t) {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzDoPut feeds mutated IPC streams through the whole DoPut path: a Flight
// client sends the messages to an in-process server over a real store.
// Whatever the bytes, no panic happens anywhere (the recovery interceptor
// must not be what saves the process: its counter must stay 0), the answer
// is OK, InvalidArgument or ResourceExhausted, a failed put leaves nothing
// visible, a successful one reads back and frees every Arrow buffer, and
// the in-flight budget is whole again.
func FuzzDoPut(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		f.Add(b)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	st, err := store.Open(f.TempDir(), store.WithAllocator(mem))
	if err != nil {
		f.Fatal(err)
	}
	var logs syncBuffer
	srv := New(st, WithAllocator(mem), WithLogger(zerolog.New(&logs).Level(zerolog.ErrorLevel)),
		WithMaxRecvMsgSize(1<<20), WithMaxInflightBytes(8<<20), WithMaxColumns(fuzzMaxColumns), WithMaxDepth(fuzzMaxDepth),
		WithIdleTimeout(10*time.Second))
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Stop(ctx)
	})
	c, err := flight.NewClientWithMiddleware("passthrough:///bufnet", nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	var seq atomic.Int64
	f.Fuzz(func(t *testing.T, data []byte) {
		before := mem.CurrentAlloc()
		msgs := decodeFrames(data)
		path := fmt.Sprintf("f%d", seq.Add(1))
		if len(msgs) > 0 {
			msgs[0].FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{path}}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		code, err := sendPut(ctx, c, msgs)
		if n := metricValue(t, srv.metrics.panics.WithLabelValues("DoPut")); n != 0 {
			t.Fatalf("a panic was recovered in DoPut (%v: %v); log:\n%s", code, err, logs.String())
		}
		switch code {
		case codes.OK, codes.InvalidArgument, codes.ResourceExhausted:
		default:
			t.Fatalf("DoPut answered %v: %v; log:\n%s", code, err, logs.String())
		}
		if code == codes.OK {
			if err := getErr(ctx, c, path); err != nil {
				t.Fatalf("an accepted put does not read back: %v", err)
			}
		} else if _, _, err := st.Versions(ctx, []string{path}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a failed put (%v) left something: %v", code, err)
		}
		// Only an accepted put must free every buffer: arrow-go's IPC reader
		// drops the buffers it already decompressed when a later buffer of
		// the batch fails (the garbage collector frees them; the in-flight
		// budget gets its charge back from budgetAllocator.close).
		if n := mem.CurrentAlloc() - before; n != 0 && code == codes.OK {
			t0 := time.Now()
			for mem.CurrentAlloc() != before && time.Since(t0) < 2*time.Second {
				time.Sleep(time.Millisecond)
			}
			t.Fatalf("%d bytes of Arrow memory still allocated after the put (%v: %v); %d after %v more", n, code, err, mem.CurrentAlloc()-before, time.Since(t0))
		}
		if n, m := srv.budget.used.Load(), srv.reqBudget.used.Load(); n != 0 || m != 0 {
			t.Fatalf("%d and %d bytes of the in-flight budgets still reserved after the put (%v: %v)", n, m, code, err)
		}
	})
}

// sendPut sends msgs as one DoPut and returns the code of its answer.
func sendPut(ctx context.Context, c flight.Client, msgs []*flight.FlightData) (codes.Code, error) {
	stream, err := c.DoPut(ctx)
	if err != nil {
		return status.Code(err), err
	}
	for _, m := range msgs {
		if stream.Send(m) != nil {
			break // the server's answer comes with Recv
		}
	}
	_ = stream.CloseSend()
	for {
		_, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return codes.OK, nil
		}
		if err != nil {
			return status.Code(err), err
		}
	}
}

// TestDoPutSeedOutcomes pins what each seed of FuzzDoPut gets.
func TestDoPutSeedOutcomes(t *testing.T) {
	ts := startSrv(t, true, WithMaxRecvMsgSize(1<<20), WithMaxInflightBytes(8<<20), WithMaxColumns(fuzzMaxColumns), WithMaxDepth(fuzzMaxDepth))
	want := map[string]codes.Code{
		"primitives": codes.OK, "two-batches": codes.OK, "strings": codes.OK, "nested": codes.OK,
		"dictionary": codes.OK, "zstd": codes.OK,
		"crasher-string-offsets-backwards": codes.InvalidArgument,
		"short-body":                       codes.InvalidArgument,
		"short-body-large":                 codes.InvalidArgument,
		"bomb-compressed-1TiB":             codes.ResourceExhausted,
		"too-many-columns":                 codes.ResourceExhausted,
		"too-deep":                         codes.ResourceExhausted,
		"null-rows-2^40":                   codes.InvalidArgument,
		"null-columns":                     codes.OK,
	}
	seeds := fuzzSeeds(t)
	for name := range want {
		if seeds[name] == nil {
			t.Errorf("no seed %s", name)
		}
	}
	for name, b := range seeds {
		msgs := decodeFrames(b)
		msgs[0].FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}}
		code, err := sendPut(context.Background(), ts.c, msgs)
		if code != want[name] {
			t.Errorf("%s: %v (%v), want %v", name, code, err, want[name])
		}
		if err != nil && strings.Contains(err.Error(), "/tmp") {
			t.Errorf("%s: a server path in %v", name, err)
		}
		t.Logf("%s: %v %v", name, code, err)
	}
	if n := metricValue(t, ts.srv.metrics.panics.WithLabelValues("DoPut")); n != 0 {
		t.Fatalf("%v panics recovered", n)
	}
}
