package flightserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/internal/quivertest"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
)

// start runs a Server over a temp store on a loopback port, with a checked
// allocator that must be back to zero when the test ends.
func start(t *testing.T, opts ...Option) (flight.Client, *memory.CheckedAllocator) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	st, err := store.Open(t.TempDir(), store.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assertFreed(t, mem) }) // after the stop below
	srv := New(st, append([]Option{WithAllocator(mem)}, opts...)...)
	c := quivertest.MustDial(t, quivertest.ServeInProcess(t, srv, quivertest.Graceful()), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(4<<20)))
	return c, mem
}

// assertFreed fails t unless everything allocated from mem comes back.
// Messages a dead connection left queued in gRPC are released when the
// garbage collector finds them (sendcodec.go), so a test whose client went
// away mid-stream (TestDoGetClientGoesAway: a CI run under -race asserted
// before the collector had run) gives the collector a few seconds first.
func assertFreed(t *testing.T, mem *memory.CheckedAllocator) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); mem.CurrentAlloc() != 0 && time.Now().Before(end); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	mem.AssertSize(t, 0)
}

func strBatch(n int, width int) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	pad := make([]byte, width)
	for i := range pad {
		pad[i] = 'x'
	}
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(string(pad))
	}
	return b.NewRecordBatch()
}

func doPut(t *testing.T, c flight.Client, path string, rec arrow.RecordBatch) *store.CommitRecord {
	t.Helper()
	stream, err := c.DoPut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{path}})
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	_ = stream.CloseSend()
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var cr store.CommitRecord
	if err := json.Unmarshal(res.AppMetadata, &cr); err != nil {
		t.Fatal(err)
	}
	return &cr
}

// TestDoGetSlices: a batch of ~16 MiB comes back to a client with grpc's
// default 4 MiB receive limit, in several messages.
func TestDoGetSlices(t *testing.T) {
	c, _ := start(t)
	rec := strBatch(4000, 4000)
	defer rec.Release()
	if cr := doPut(t, c, "wide", rec); cr.Rows != 4000 {
		t.Fatalf("put %+v", cr)
	}
	stream, err := c.DoGet(context.Background(), &flight.Ticket{Ticket: []byte("wide")})
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var rows int64
	var msgs int
	for rdr.Next() {
		rows += rdr.RecordBatch().NumRows()
		msgs++
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	if rows != 4000 || msgs < 4 {
		t.Fatalf("%d rows in %d messages", rows, msgs)
	}
}

// TestDoGetClientGoesAway: a client that stops reading and cancels does not
// leak a batch (the checked allocator ends at zero).
func TestDoGetClientGoesAway(t *testing.T) {
	c, _ := start(t, WithMaxSendMsgSize(64<<10))
	rec := strBatch(2000, 1000)
	defer rec.Release()
	doPut(t, c, "p", rec)
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	time.Sleep(100 * time.Millisecond)
}

func TestStatusOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want codes.Code
	}{
		{store.ErrInvalidKey, codes.InvalidArgument},
		{store.ErrSchemaMismatch, codes.InvalidArgument},
		{store.ErrNotFound, codes.NotFound},
		{store.ErrVersionNotFound, codes.NotFound},
		{store.ErrFormatMismatch, codes.FailedPrecondition},
		{store.ErrLockTimeout, codes.Unavailable},
		{store.ErrTooLarge, codes.ResourceExhausted},
		{&store.CorruptionError{Path: "a/manifest.json", Err: io.ErrUnexpectedEOF}, codes.DataLoss},
		// Whatever a parser's error inside a corruption says, the file is
		// the store's, not the request's (red team round 19, t04).
		{fmt.Errorf("put a: %w", &store.CorruptionError{Path: "a/.log/00000000000000000003.ndjson", Err: fmt.Errorf("line 2: %w", io.EOF)}), codes.DataLoss},
		{&store.CorruptionError{Path: "a/v0/.version.json", Err: fmt.Errorf("%w: no schema", store.ErrInvalidArgument)}, codes.DataLoss},
		{store.ErrDataLoss, codes.DataLoss},
		{fmt.Errorf("read: %w", fsys.ErrTooLarge), codes.DataLoss},
		// The storage service did not answer (red team round 48's p01),
		// wherever the error was wrapped.
		{fmt.Errorf("read a: %w", fsys.ErrUnavailable), codes.Unavailable},
		{&store.CorruptionError{Path: "a/manifest.json", Err: fsys.ErrUnavailable}, codes.Unavailable},
		{fmt.Errorf("read a: %w", errors.Join(fsys.ErrDenied, fsys.ErrUnavailable)), codes.Unavailable},
		{fmt.Errorf("read a: %w", fsys.ErrStorage), codes.Unavailable},
		{fmt.Errorf("write a: %w", fsys.ErrExist), codes.Unavailable},
		{errors.New("open /srv/secret/data: boom"), codes.Internal},
		{context.Canceled, codes.Canceled},
		{status.Error(codes.ResourceExhausted, "too big"), codes.ResourceExhausted},
	} {
		got := statusOf(errors.Join(c.err))
		if status.Code(got) != c.want {
			t.Errorf("statusOf(%v) = %v, want %s", c.err, got, c.want)
		}
	}
	// A full disk names the directory that is full (red team round 25's
	// z04: the spill's was blamed on the data dir).
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("put a: write x: %w", syscall.ENOSPC), "data directory is full"},
		{fmt.Errorf("put a: spill: %w: %w", store.ErrSpillFull, syscall.ENOSPC), "spill directory (--spill-dir"},
	} {
		got := statusOf(c.err)
		if status.Code(got) != codes.ResourceExhausted || !strings.Contains(status.Convert(got).Message(), c.want) {
			t.Errorf("statusOf(%v) = %v, want ResourceExhausted saying %q", c.err, got, c.want)
		}
	}
	if msg := status.Convert(statusOf(errors.New("open /srv/secret/data: boom"))).Message(); msg != "internal error (see server log)" {
		t.Errorf("internal message leaks: %q", msg)
	}
	// The end of a client's stream is a bad request; an io.EOF of the
	// server's own reading (a file read back, the spill) or inside the
	// store's report of a damaged file is not one.
	s := &Server{}
	if got := status.Code(statusOf(s.streamError(fmt.Errorf("%w: put to a: %w", store.ErrBadStream, io.EOF), "put a"))); got != codes.InvalidArgument {
		t.Errorf("stream ended: %v, want InvalidArgument", got)
	}
	if got := status.Code(statusOf(s.streamError(fmt.Errorf("put a: read back x: %w", io.ErrUnexpectedEOF), "put a"))); got != codes.Internal {
		t.Errorf("the server's own short read: %v, want Internal", got)
	}
	if got := status.Code(statusOf(s.streamError(fmt.Errorf("put a: read back x: %w", io.EOF), "put a"))); got != codes.Internal {
		t.Errorf("the server's own io.EOF: %v, want Internal", got)
	}
	damaged := fmt.Errorf("put a: %w", &store.CorruptionError{Path: "a/.log/00000000000000000003.ndjson", Err: fmt.Errorf("line 2: %w", io.EOF)})
	if got := statusOf(s.streamError(damaged, "put a")); status.Code(got) != codes.DataLoss || !strings.Contains(status.Convert(got).Message(), "a/.log/") {
		t.Errorf("damaged log: %v, want DataLoss naming the segment", got)
	}
}
