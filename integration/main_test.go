package integration

// TestMain builds the quiver binary; each test starts `quiver serve` on a
// free loopback port with a temporary data dir (with QUIVER_TEST_STORAGE=s3:
// a new bucket on a versitygw of its own) and talks to it with the
// Go client (client), or its raw Flight client for tests of the wire
// protocol itself. Set QUIVER_BIG=1 to also run the 1 GB DoGet, and
// QUIVER_RACE=1 to build the server with the race detector.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/internal/quivertest"
)

var binary string

func TestMain(m *testing.M) {
	bin, err := quivertest.Build(os.Getenv("QUIVER_RACE") == "1") // -race: the server itself under the race detector
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	code := m.Run()
	os.RemoveAll(filepath.Dir(bin))
	os.Exit(code)
}

// server is one running `quiver serve` and a client of it.
type server struct {
	*quivertest.Proc
	addr string
	// dataDir is where its data lies on this machine (on S3: versitygw's
	// backend directory of the bucket's prefix).
	dataDir string
	// client is the Go client, without retries (a test sees every
	// answer); flight is its raw Flight client, for the tests of the wire
	// protocol itself (descriptor and ticket forms, malformed requests).
	client *client.Client
	flight flight.Client
}

// startServer runs quiver serve on 127.0.0.1:0 over fresh storage (a temp
// dir, or a new bucket with QUIVER_TEST_STORAGE=s3) with extra flags,
// waits for its address and connects a client. The server gets SIGTERM
// at cleanup and must exit 0.
func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	p := quivertest.MustStart(t, binary, quivertest.FromEnv(t), extra...)
	s := &server{Proc: p, addr: p.Addr, dataDir: p.Storage.Dir}
	s.client = connect(t, p.Addr)
	s.flight = s.client.Flight()
	return s
}

// connect returns a Go client of addr that does not retry, closed when
// the test ends.
func connect(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Connect(ctxT(t), addr, append([]client.Option{client.WithRetry(client.RetryPolicy{})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// putResult is the DoPut app_metadata (DESIGN.md §3.1).
type putResult = catalog.PutResult

func cmdDesc(v any) *flight.FlightDescriptor { return quivertest.CmdDesc(v) }

func pathDesc(keys ...string) *flight.FlightDescriptor { return quivertest.PathDesc(keys...) }

// put sends recs to the profile at path as one put and returns the
// PutResult.
func put(ctx context.Context, c *client.Client, path string, opts client.PutOptions, recs ...arrow.RecordBatch) (*putResult, error) {
	rdr, err := array.NewRecordReader(recs[0].Schema(), recs)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	return c.Put(ctx, path, rdr, opts)
}

func mustPut(t *testing.T, c *client.Client, path string, opts client.PutOptions, recs ...arrow.RecordBatch) *putResult {
	t.Helper()
	pr, err := put(ctxT(t), c, path, opts, recs...)
	if err != nil {
		t.Fatalf("put %s: %v", path, err)
	}
	return pr
}

// rawPut sends recs as one DoPut to desc as it is (a test of the
// descriptor forms, or of what the server refuses).
func rawPut(ctx context.Context, c flight.Client, desc *flight.FlightDescriptor, recs ...arrow.RecordBatch) (*putResult, error) {
	return quivertest.Put(ctx, c, desc, recs[0].Schema(), recs...)
}

func mustRawPut(t *testing.T, c flight.Client, desc *flight.FlightDescriptor, recs ...arrow.RecordBatch) *putResult {
	t.Helper()
	pr, err := rawPut(ctxT(t), c, desc, recs...)
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	return pr
}

// table is what a DoGet returned.
type table struct {
	schema *arrow.Schema
	recs   []arrow.RecordBatch
	rows   int64
}

func (tb *table) release() {
	for _, r := range tb.recs {
		r.Release()
	}
}

// get reads one ticket (as it is) completely.
func get(ctx context.Context, c *client.Client, ticket []byte) (*table, error) {
	rdr, err := c.ReadTicket(ctx, ticket)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	tb := &table{schema: rdr.Schema()}
	for rdr.Next() {
		r := rdr.RecordBatch()
		r.Retain()
		tb.recs = append(tb.recs, r)
		tb.rows += r.NumRows()
	}
	if err := rdr.Err(); err != nil {
		tb.release()
		return nil, err
	}
	return tb, nil
}

func mustGet(t *testing.T, c *client.Client, ticket string) *table {
	t.Helper()
	tb, err := get(ctxT(t), c, []byte(ticket))
	if err != nil {
		t.Fatalf("DoGet %s: %v", ticket, err)
	}
	t.Cleanup(tb.release)
	return tb
}

// ints collects an int64 column of a table.
func ints(t *testing.T, tb *table, col string) []int64 {
	t.Helper()
	var out []int64
	for _, r := range tb.recs {
		idx := r.Schema().FieldIndices(col)
		if len(idx) != 1 {
			t.Fatalf("no column %q in %s", col, r.Schema())
		}
		out = append(out, r.Column(idx[0]).(*array.Int64).Int64Values()...)
	}
	return out
}

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: arrow.NewMetadata([]string{"doc"}, []string{"row id"})},
	{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "val", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, func() *arrow.Metadata { m := arrow.NewMetadata([]string{"owner"}, []string{"tests"}); return &m }())

// batch makes n rows with ids from start; region is regions[i%len].
func batch(start, n int64, regions ...string) arrow.RecordBatch {
	if len(regions) == 0 {
		regions = []string{"eu"}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for i := int64(0); i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(start + i)
		b.Field(1).(*array.StringBuilder).Append(regions[int(i)%len(regions)])
		b.Field(2).(*array.Float64Builder).Append(float64(start+i) / 2)
	}
	return b.NewRecordBatch()
}

func code(err error) codes.Code { return status.Code(err) }
