package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/flightserver"
	"github.com/quiverdb/quiver/internal/quivertest"
	"github.com/quiverdb/quiver/store"
)

// server is an in-process Quiver server on a loopback port over a temp
// store, with a checked allocator that must be back to zero at the end.
type server struct {
	addr string
	st   *store.Store
}

func startServer(t *testing.T, opts ...flightserver.Option) *server {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	st, err := store.Open(t.TempDir(), store.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the stop below
	srv := flightserver.New(st, append([]flightserver.Option{flightserver.WithAllocator(mem)}, opts...)...)
	return &server{addr: quivertest.ServeInProcess(t, srv), st: st}
}

// connect returns a client of s with a checked allocator, closed and
// checked at the end of the test.
func connect(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	c, err := client.Connect(context.Background(), addr, append([]client.Option{client.WithAllocator(mem)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		mem.AssertSize(t, 0)
	})
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

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
	}
	return b.NewRecordBatch()
}

// reader returns a reader of the batches, which it releases.
func reader(t *testing.T, recs ...arrow.RecordBatch) array.RecordReader {
	t.Helper()
	rdr, err := array.NewRecordReader(testSchema, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
	t.Cleanup(rdr.Release)
	return rdr
}

// ids drains rdr and returns its id column; it releases rdr.
func ids(t *testing.T, rdr array.RecordReader) []int64 {
	t.Helper()
	defer rdr.Release()
	var out []int64
	for rdr.Next() {
		col := rdr.RecordBatch().Column(0).(*array.Int64)
		out = append(out, col.Int64Values()...)
	}
	if err := rdr.Err(); err != nil {
		t.Fatalf("read: %v", err)
	}
	return out
}

func seq(from, n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

// pki is quivertest's test PKI with the server options of its pair.
type pki struct{ *quivertest.PKI }

func newPKI(t *testing.T) *pki { return &pki{quivertest.NewPKI(t)} }

// serverTLS is the server side of p; mutual asks for client certificates.
func (p *pki) serverTLS(t *testing.T, mutual bool) flightserver.Option {
	t.Helper()
	files := flightserver.TLSFiles{CertFile: p.CertFile, KeyFile: p.KeyFile}
	if mutual {
		files.ClientCAFile = p.CAFile
	}
	cfg, _, err := flightserver.LoadTLS(files)
	if err != nil {
		t.Fatal(err)
	}
	return flightserver.WithTLS(cfg)
}
