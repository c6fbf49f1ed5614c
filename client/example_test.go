package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/flightserver"
	"github.com/quiverdb/quiver/store"
)

// serve starts a Quiver server over a new store in a temp dir on a
// loopback port and returns its address and a function that stops it.
func serve() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "quiver-example")
	if err != nil {
		log.Fatal(err)
	}
	st, err := store.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	srv := flightserver.New(st)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	return lis.Addr().String(), func() {
		srv.Stop(context.Background())
		_ = os.RemoveAll(dir)
	}
}

// Put a table, read it back, plan a parallel read and list the versions.
func Example() {
	addr, stop := serve()
	defer stop()
	ctx := context.Background()

	c, err := client.Connect(ctx, addr) // or "grpc+tls://host:port" with client.WithCAFile(…)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "region", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"eu", "us", "eu"}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		log.Fatal(err)
	}
	defer rdr.Release()

	// A new version partitioned by region; the request id makes a retry
	// safe.
	res, err := c.Put(ctx, "sales/orders", rdr, client.PutOptions{
		Mode: catalog.ModeWrite, PartitionBy: []string{"region"}, RequestID: "load-2026-01-01",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("put %s %s: %d rows in %d files\n", res.Path, res.Version, res.Rows, len(res.Files))

	// One stream: the eu partition, column id.
	out, err := c.Read(ctx, client.ReadRequest{Path: "sales/orders", Columns: []string{"id"},
		Partition: map[string][]string{"region": {"eu"}}})
	if err != nil {
		log.Fatal(err)
	}
	for out.Next() {
		fmt.Println("eu ids:", out.RecordBatch().Column(0))
	}
	if err := out.Err(); err != nil {
		log.Fatal(err)
	}
	out.Release()

	// Plan once, fetch the endpoints in parallel: one snapshot, in order.
	plan, err := c.Plan(ctx, client.ReadRequest{Path: "sales/orders"})
	if err != nil {
		log.Fatal(err)
	}
	all, err := c.ReadParallel(ctx, plan, 4)
	if err != nil {
		log.Fatal(err)
	}
	var rows int64
	for all.Next() {
		rows += all.RecordBatch().NumRows()
	}
	all.Release()
	fmt.Printf("planned %d rows, read %d\n", plan.TotalRecords, rows)

	vs, err := c.ListVersions(ctx, "sales/orders")
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range vs.Versions {
		fmt.Printf("%s: %d rows, partitioned by %v (latest %s)\n", v.Version, v.Rows, v.PartitionBy, vs.Latest)
	}

	// Output:
	// put sales/orders v0: 3 rows in 2 files
	// eu ids: [1 3]
	// planned 3 rows, read 3
	// v0: 3 rows, partitioned by [region] (latest v0)
}

// Errors are the server's gRPC status: test them with status.Code.
func Example_errors() {
	addr, stop := serve()
	defer stop()
	ctx := context.Background()
	c, err := client.Connect(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	_, err = c.Read(ctx, client.ReadRequest{Path: "no/such"})
	fmt.Println(status.Code(err) == codes.NotFound)

	_, err = c.RemoveOldVersions(ctx, client.RemoveOldVersionsRequest{Path: "no/such", Keep: 0})
	fmt.Println(status.Code(err))

	_, err = client.Connect(ctx, "http://"+addr)
	fmt.Println(errors.Is(err, client.ErrInvalidAddress))

	// Output:
	// true
	// InvalidArgument
	// true
}
