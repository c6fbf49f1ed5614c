package flightserver

// Benchmarks of DoGet and DoPut through an in-process server on a loopback
// port, with a grpc-go Flight client: the numbers and profiles of issue 8.
//
//	go test ./flightserver/ -run '^$' -bench 'DoGet|DoPut' -benchmem
//	go test ./flightserver/ -run '^$' -bench DoGet -cpuprofile cpu.out -memprofile mem.out
//
// By default they generate their data (about 64 MiB of Arrow in 20 mixed
// columns; DoGet reads it as a write partitioned 64 ways). Set
// QUIVER_BENCH_DATA to a data dir (e.g. the one bench/bench.py made, under
// /tmp/quiver-bench-<scale>/data) and QUIVER_BENCH_PATH to a profile in it
// (default bench/full) to profile DoGet over real benchmark data.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"

	"github.com/quiverdb/quiver/internal/quivertest"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/ipccache"
)

const benchRows = 1 << 16

var benchSchema = func() *arrow.Schema {
	fs := []arrow.Field{{Name: "part", Type: arrow.PrimitiveTypes.Int32}, {Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	for i := 0; i < 6; i++ {
		fs = append(fs, arrow.Field{Name: fmt.Sprintf("i%d", i), Type: arrow.PrimitiveTypes.Int64})
	}
	for i := 0; i < 6; i++ {
		fs = append(fs, arrow.Field{Name: fmt.Sprintf("f%d", i), Type: arrow.PrimitiveTypes.Float64})
	}
	for i := 0; i < 4; i++ {
		fs = append(fs, arrow.Field{Name: fmt.Sprintf("s%d", i), Type: arrow.BinaryTypes.String})
	}
	fs = append(fs, arrow.Field{Name: "ts0", Type: ts}, arrow.Field{Name: "ts1", Type: ts})
	return arrow.NewSchema(fs, nil)
}()

// benchBatches: 16 batches of 64 Ki rows (about 64 MiB), generated once.
var benchBatches = sync.OnceValue(func() []arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(8, 8))
	words := make([]string, 1000)
	for i := range words {
		words[i] = fmt.Sprintf("word-%x", i*7919)
	}
	var out []arrow.RecordBatch
	tok := make([]byte, 24)
	for k := 0; k < 16; k++ {
		b := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
		for r := 0; r < benchRows; r++ {
			id := int64(k*benchRows + r)
			b.Field(0).(*array.Int32Builder).Append(int32(rng.IntN(64)))
			b.Field(1).(*array.Int64Builder).Append(id)
			for i := 0; i < 6; i++ {
				b.Field(2 + i).(*array.Int64Builder).Append(rng.Int64N(int64(1) << (8 * (i + 2))))
			}
			for i := 0; i < 6; i++ {
				b.Field(8 + i).(*array.Float64Builder).Append(float64(rng.IntN(1_000_000)) / 100)
			}
			b.Field(14).(*array.StringBuilder).Append(words[rng.IntN(16)])
			b.Field(15).(*array.StringBuilder).Append(words[rng.IntN(len(words))])
			for j := range tok {
				tok[j] = "0123456789abcdef"[rng.IntN(16)]
			}
			b.Field(16).(*array.StringBuilder).Append(string(tok))
			b.Field(17).(*array.StringBuilder).Append(words[(r/1000)%len(words)])
			b.Field(18).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + id*1000))
			b.Field(19).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + rng.Int64N(1<<45)))
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
})

func benchBytes() int64 {
	var n int64
	for _, rec := range benchBatches() {
		n += recordSize(rec)
	}
	return n
}

// benchServer serves dir (a temp dir if empty) in-process; it returns a
// client that accepts messages of any size, as pyarrow does.
func benchServer(b *testing.B, dir string, opts ...store.Option) (*store.Store, flight.Client) {
	b.Helper()
	if dir == "" {
		dir = b.TempDir()
	}
	st, err := store.Open(dir, opts...)
	if err != nil {
		b.Fatal(err)
	}
	addr := quivertest.ServeInProcess(b, New(st))
	c := quivertest.MustDial(b, addr, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30), grpc.MaxCallSendMsgSize(1<<30)))
	return st, c
}

func benchPut(b *testing.B, c flight.Client, cmd map[string]any) {
	b.Helper()
	stream, err := c.DoPut(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	desc, _ := json.Marshal(cmd)
	w := flight.NewRecordWriter(stream, ipc.WithSchema(benchSchema))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: desc})
	for _, rec := range benchBatches() {
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		b.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		b.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); err == io.EOF {
			break
		} else if err != nil {
			b.Fatal(err)
		}
	}
}

func benchGet(b *testing.B, c flight.Client, ticket string) (rows, n int64) {
	b.Helper()
	stream, err := c.DoGet(context.Background(), &flight.Ticket{Ticket: []byte(ticket)})
	if err != nil {
		b.Fatal(err)
	}
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		b.Fatal(err)
	}
	defer rdr.Release()
	for rdr.Next() {
		rows += rdr.RecordBatch().NumRows()
		n += recordSize(rdr.RecordBatch())
	}
	if err := rdr.Err(); err != nil {
		b.Fatal(err)
	}
	return rows, n
}

// BenchmarkDoGet reads a whole profile (64 partitions) through DoGet,
// decoding Parquet, and from a hot IPC cache (cached); and two columns of
// it (cols2) both ways.
func BenchmarkDoGet(b *testing.B) {
	dir, path := os.Getenv("QUIVER_BENCH_DATA"), os.Getenv("QUIVER_BENCH_PATH")
	if path == "" {
		path = "bench/full"
	}
	cols2 := `["id", "price"]` // the suite's data (bench/bench.py)
	if dir == "" {
		cols2 = `["id", "f0"]`
		dir = b.TempDir()
		_, c := benchServer(b, dir)
		benchPut(b, c, map[string]any{"path": path, "mode": "write", "partition_by": []string{"part"}})
	}
	for _, cols := range []string{"", "cols2"} {
		for _, cached := range []bool{false, true} {
			name := "parquet"
			if cached {
				name = "cached"
			}
			if cols != "" {
				name += "-" + cols
			}
			b.Run(name, func(b *testing.B) {
				var opts []store.Option
				if cached {
					c, err := ipccache.Open(b.TempDir(), 8<<30)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { c.Close() })
					opts = append(opts, store.WithCache(c))
				}
				_, c := benchServer(b, dir, opts...)
				ticket := fmt.Sprintf(`{"path": %q}`, path)
				_, n := benchGet(b, c, ticket) // warm the page cache (and fill the cache)
				if cols != "" {
					ticket = fmt.Sprintf(`{"path": %q, "columns": %s}`, path, cols2)
					_, n = benchGet(b, c, ticket)
				}
				b.SetBytes(n)
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := cpuTime()
				for b.Loop() {
					benchGet(b, c, ticket)
				}
				// CPU time (server and client) per read: steadier than the
				// wall time on a loaded machine.
				b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
			})
		}
	}
}

// BenchmarkDoPut writes about 64 MiB in 64 Ki-row batches as one new
// version (one file), and as a write partitioned 64 ways.
func BenchmarkDoPut(b *testing.B) {
	for _, part := range []bool{false, true} {
		name := "one-file"
		if part {
			name = "partitioned-64"
		}
		b.Run(name, func(b *testing.B) {
			_, c := benchServer(b, "")
			b.SetBytes(benchBytes())
			b.ReportAllocs()
			for b.Loop() {
				cmd := map[string]any{"path": "bench/put", "mode": "write"}
				if part {
					cmd["partition_by"] = []string{"part"}
				}
				benchPut(b, c, cmd)
			}
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGetFlightInfo plans a read of a profile (QUIVER_BENCH_PATH;
// bench/hist3000 is the suite's profile of 3,000 appends) and lists
// the profiles under QUIVER_BENCH_LIST (ListFlights).
func BenchmarkGetFlightInfo(b *testing.B) {
	dir, path := os.Getenv("QUIVER_BENCH_DATA"), os.Getenv("QUIVER_BENCH_PATH")
	if dir == "" || path == "" {
		b.Skip("QUIVER_BENCH_DATA and QUIVER_BENCH_PATH name the data")
	}
	_, c := benchServer(b, dir)
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: strings.Split(path, "/")}
	b.Run("info", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			if _, err := c.GetFlightInfo(context.Background(), desc); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	})
	if prefix := os.Getenv("QUIVER_BENCH_LIST"); prefix != "" {
		b.Run("list", func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				s, err := c.ListFlights(context.Background(), &flight.Criteria{Expression: []byte(prefix)})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					if _, err := s.Recv(); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n == 0 {
					b.Fatal("nothing listed")
				}
			}
			b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}
