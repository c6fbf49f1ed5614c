// Command flightbench is the Go Flight client of the benchmark suite
// (bench/bench.py drives it). Every subcommand prints one JSON object on
// stdout.
//
//	flightbench get -addr HOST:PORT -ticket T
//	    one DoGet, consuming every batch: {"seconds", "rows", "bytes"}; the
//	    connection is opened (one ListActions) before the clock starts
//	flightbench gets -addr HOST:PORT
//	    a DoGet per ticket read from stdin (one per line) over one
//	    connection, as a long-lived client does (the pyarrow client of the
//	    suite too): a JSON line {"seconds", "rows", "bytes"} per ticket
//	flightbench append -addr HOST:PORT -path P -writers W -duration D -rows N
//	    [-count C] W goroutines, each appending N-row batches (one DoPut each) to
//	    profile P until D has passed (or C appends in all): {"appends", "rows", "seconds",
//	    "per_s", "p50_ms", "p99_ms", "errors"}
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/client"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: flightbench get|append [flags]")
		os.Exit(2)
	}
	if path := os.Getenv("FLIGHTBENCH_CPUPROFILE"); path != "" {
		// For profiling the client side of a case (not used by the suite).
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	var err error
	switch os.Args[1] {
	case "get":
		err = get(os.Args[2:])
	case "gets":
		err = gets(os.Args[2:])
	case "append":
		err = appendCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flightbench:", err)
		os.Exit(1)
	}
}

func dial(addr string) (*client.Client, error) {
	// The pyarrow peer sends batches as they come (often > 4 MiB): accept
	// any size, as pyarrow does. No retries: a failed append counts as an
	// error, as it did when every append was one DoPut.
	return client.Connect(context.Background(), addr,
		client.WithRetry(client.RetryPolicy{}),
		client.WithMaxRecvMsgSize(1<<31-1),
		client.WithDialOptions(grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(1<<31-1))))
}

func emit(v any) error { return json.NewEncoder(os.Stdout).Encode(v) }

func get(args []string) error {
	fs := flag.NewFlagSet("get", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8815", "server address")
	ticket := fs.String("ticket", "", "ticket bytes")
	_ = fs.Parse(args)
	c, err := connect(*addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return readOnce(c, *ticket)
}

// connect dials addr and opens the connection (grpc-go dials lazily), so
// that a read's time is the read's, as for the pyarrow client, which the
// suite connects once per server.
func connect(addr string) (*client.Client, error) {
	c, err := dial(addr)
	if err != nil {
		return nil, err
	}
	if err := warm(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// gets reads tickets from stdin, one per line, and reads each over one
// connection.
func gets(args []string) error {
	fs := flag.NewFlagSet("gets", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8815", "server address")
	_ = fs.Parse(args)
	c, err := connect(*addr)
	if err != nil {
		return err
	}
	defer c.Close()
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if err := readOnce(c, sc.Text()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// readOnce reads ticket, consuming every batch, and prints the time, rows
// and bytes.
func readOnce(c *client.Client, ticket string) error {
	start := time.Now()
	rdr, err := c.ReadTicket(context.Background(), []byte(ticket))
	if err != nil {
		return err
	}
	defer rdr.Release()
	var rows, bytes int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		rows += rec.NumRows()
		for _, col := range rec.Columns() {
			bytes += dataSize(col.Data())
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	return emit(map[string]any{"seconds": time.Since(start).Seconds(), "rows": rows, "bytes": bytes})
}

// warm makes one cheap RPC (ListActions) to open the connection. Its
// answer does not matter (a server may not implement it); a transport
// failure does.
func warm(c *client.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Raw: the client has no ListActions, and this must work against the
	// pyarrow peer too.
	s, err := c.Flight().ListActions(ctx, &flight.Empty{})
	for err == nil {
		_, err = s.Recv()
	}
	if errors.Is(err, io.EOF) || status.Code(err) != codes.Unavailable {
		return nil
	}
	return fmt.Errorf("connect: %w", err)
}

func dataSize(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataSize(c)
	}
	return n
}

// smallBatch is a 1,000-row batch of a few mixed columns.
func smallBatch(rows int, seed int64) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := 0; i < rows; i++ {
		v := seed*int64(rows) + int64(i)
		b.Field(0).(*array.Int64Builder).Append(v)
		b.Field(1).(*array.Float64Builder).Append(float64(v) * 0.5)
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("name-%d", v%997))
		b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + v))
	}
	return b.NewRecordBatch()
}

// putOnce appends rec to the profile at path (one DoPut).
func putOnce(c *client.Client, path string, rec arrow.RecordBatch) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		return err
	}
	defer rdr.Release()
	_, err = c.Put(ctx, path, rdr, client.PutOptions{})
	return err
}

func appendCmd(args []string) error {
	fs := flag.NewFlagSet("append", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8815", "server address")
	path := fs.String("path", "bench/appends", "profile")
	writers := fs.Int("writers", 1, "concurrent writers")
	dur := fs.Duration("duration", 5*time.Second, "how long to append")
	rows := fs.Int("rows", 1000, "rows per append")
	count := fs.Int("count", 0, "stop after this many appends in all (0: run for -duration)")
	_ = fs.Parse(args)
	c, err := dial(*addr)
	if err != nil {
		return err
	}
	defer c.Close()
	// The first append creates the profile; not timed.
	warm := smallBatch(*rows, 0)
	err = putOnce(c, *path, warm)
	warm.Release()
	if err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		lats []time.Duration
		errs int
		wg   sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(*dur)
	var left atomic.Int64
	left.Store(int64(*count))
	more := func() bool {
		if *count > 0 {
			return left.Add(-1) >= 0
		}
		return time.Now().Before(deadline)
	}
	for w := 0; w < *writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rec := smallBatch(*rows, int64(w+1))
			defer rec.Release()
			var mine []time.Duration
			bad := 0
			for more() {
				t0 := time.Now()
				if err := putOnce(c, *path, rec); err != nil {
					bad++
					if bad == 1 {
						fmt.Fprintln(os.Stderr, "flightbench: append:", err)
					}
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			errs += bad
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	pct := func(p float64) float64 {
		if len(lats) == 0 {
			return 0
		}
		i := int(p * float64(len(lats)-1))
		return float64(lats[i].Microseconds()) / 1000
	}
	return emit(map[string]any{
		"appends": len(lats), "rows": len(lats) * *rows, "seconds": secs,
		"per_s": float64(len(lats)) / secs, "p50_ms": pct(0.50), "p99_ms": pct(0.99), "errors": errs,
	})
}
