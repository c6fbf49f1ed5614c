package integration

// TestMain builds the quiver binary; each test starts `quiver serve` on a
// free loopback port with a temporary data dir and talks to it with the
// arrow-go Flight client. Set QUIVER_BIG=1 to also run the 1 GB DoGet, and
// QUIVER_RACE=1 to build the server with the race detector.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "quiver-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "quiver")
	args := []string{"build", "-o", binary}
	if os.Getenv("QUIVER_RACE") == "1" {
		args = append(args, "-race") // the server itself under the race detector
	}
	build := exec.Command("go", append(args, "github.com/quiverdb/quiver/cmd/quiver")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build quiver:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is one running `quiver serve`.
type server struct {
	addr    string
	dataDir string
	cmd     *exec.Cmd
	client  flight.Client
	logs    *strings.Builder
}

// startServer runs quiver serve on 127.0.0.1:0 with a fresh data dir (or
// dataDir when given via the QUIVER_DATA_DIR-free flag) and extra flags,
// waits for its "serving … on ADDR" line and connects a client. The server
// gets SIGTERM at cleanup and must exit 0.
func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	s := &server{dataDir: t.TempDir(), logs: &strings.Builder{}}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", s.dataDir, "--log-level", "warn"}, extra...)
	s.cmd = exec.Command(binary, args...)
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		b, _ := io.ReadAll(stderr)
		s.logs.Write(b)
	}()
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "quiver: serving ") {
				f := strings.Fields(line)
				addrc <- f[len(f)-1]
			}
		}
	}()
	select {
	case s.addr = <-addrc:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Fatal("quiver serve did not print its address")
	}
	s.client, err = flight.NewClientWithMiddleware(s.addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.client.Close()
		if s.cmd == nil {
			<-logDone
			return // the test stopped the server itself
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		err := s.cmd.Wait()
		<-logDone
		if err != nil {
			t.Errorf("quiver serve exited with %v; log:\n%s", err, s.logs.String())
		}
	})
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// putResult is the DoPut app_metadata (DESIGN.md §3.1).
type putResult struct {
	Path          string          `json:"path"`
	Version       string          `json:"version"`
	Index         int             `json:"index"`
	Rows          int64           `json:"rows"`
	SchemaVersion string          `json:"schema_version"`
	RequestID     string          `json:"request_id"`
	Metadata      json.RawMessage `json:"metadata"`
	Files         []struct {
		Path   string `json:"path"`
		Rows   int64  `json:"rows"`
		SHA256 string `json:"sha256"`
	} `json:"files"`
}

func cmdDesc(v any) *flight.FlightDescriptor {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b}
}

func pathDesc(keys ...string) *flight.FlightDescriptor {
	return &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: keys}
}

// put sends recs as one DoPut and returns the PutResult.
func put(ctx context.Context, c flight.Client, desc *flight.FlightDescriptor, recs ...arrow.RecordBatch) (*putResult, error) {
	stream, err := c.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(recs[0].Schema()))
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
	var pr putResult
	if err := json.Unmarshal(res.AppMetadata, &pr); err != nil {
		return nil, fmt.Errorf("app_metadata %q: %w", res.AppMetadata, err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("more than one PutResult (%v)", err)
	}
	return &pr, nil
}

func mustPut(t *testing.T, c flight.Client, desc *flight.FlightDescriptor, recs ...arrow.RecordBatch) *putResult {
	t.Helper()
	pr, err := put(ctxT(t), c, desc, recs...)
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

// get reads one ticket completely.
func get(ctx context.Context, c flight.Client, ticket []byte, opts ...grpc.CallOption) (*table, error) {
	stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: ticket}, opts...)
	if err != nil {
		return nil, err
	}
	rdr, err := flight.NewRecordReader(stream)
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

func mustGet(t *testing.T, c flight.Client, ticket string) *table {
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
