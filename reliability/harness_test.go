package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// ---- scale ------------------------------------------------------------------

// scale is the size of a run. QUIVER_STRESS_SCALE picks a preset ("ci" or
// "full"); single QUIVER_STRESS_* variables override a field.
type scale struct {
	Name        string
	Clients     int           // Go client goroutines in the load test
	PyClients   int           // pyarrow client processes in the load test
	Duration    time.Duration // load test duration
	Kills       int           // SIGKILLs in the fault test
	KillClients int           // Go clients during the kill test
	TinyBatches int           // "a million tiny batches"
}

var presets = map[string]scale{
	"ci":   {Name: "ci", Clients: 8, PyClients: 2, Duration: 20 * time.Second, Kills: 20, KillClients: 8, TinyBatches: 20_000},
	"full": {Name: "full", Clients: 60, PyClients: 4, Duration: 10 * time.Minute, Kills: 200, KillClients: 32, TinyBatches: 1_000_000},
}

var sc scale

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: %v", name, v, err))
		}
		return n
	}
	return def
}

func loadScale() (scale, bool) {
	name := os.Getenv("QUIVER_STRESS_SCALE")
	if name == "" {
		return scale{}, false
	}
	s, ok := presets[name]
	if !ok {
		panic(fmt.Sprintf("QUIVER_STRESS_SCALE=%q: want ci or full", name))
	}
	s.Clients = envInt("QUIVER_STRESS_CLIENTS", s.Clients)
	s.PyClients = envInt("QUIVER_STRESS_PYCLIENTS", s.PyClients)
	if v := os.Getenv("QUIVER_STRESS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			panic(err)
		}
		s.Duration = d
	}
	s.Kills = envInt("QUIVER_STRESS_KILLS", s.Kills)
	s.KillClients = envInt("QUIVER_STRESS_KILL_CLIENTS", s.KillClients)
	s.TinyBatches = envInt("QUIVER_STRESS_TINY_BATCHES", s.TinyBatches)
	return s, true
}

var (
	binary  string
	enabled bool
	python  string
	repo    string
)

func TestMain(m *testing.M) {
	sc, enabled = loadScale()
	if !enabled {
		fmt.Println("reliability: QUIVER_STRESS_SCALE unset; skipping (set ci or full, see docs/reliability.md)")
		os.Exit(m.Run())
	}
	wd, _ := os.Getwd()
	repo = filepath.Dir(wd)
	dir, err := os.MkdirTemp("", "quiver-rel-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "quiver")
	build := exec.Command("go", "build", "-o", binary, "github.com/quiverdb/quiver/cmd/quiver")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build quiver:", err)
		os.Exit(1)
	}
	if out, err := exec.Command(filepath.Join(repo, "scripts", "pyenv.sh")).Output(); err == nil {
		python = strings.TrimSpace(string(out))
	}
	fmt.Printf("reliability: scale %+v\n", sc)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func requireStress(t *testing.T) {
	t.Helper()
	if !enabled {
		t.Skip("QUIVER_STRESS_SCALE unset")
	}
}

// ---- one server process -----------------------------------------------------

type proc struct {
	addr    string
	dataDir string
	cmd     *exec.Cmd
	logs    *lockedBuf
	done    chan struct{}
	err     error
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 4<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProc runs `quiver serve` on 127.0.0.1:0 over dataDir and waits for
// its "quiver: serving DIR on ADDR" line.
func startProc(dataDir string, extra ...string) (*proc, error) {
	p := &proc{dataDir: dataDir, logs: &lockedBuf{}, done: make(chan struct{})}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "warn"}, extra...)
	p.cmd = exec.Command(binary, args...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "quiver: serving ") {
				f := strings.Fields(line)
				select {
				case addrc <- f[len(f)-1]:
				default:
				}
			}
		}
	}()
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	select {
	case p.addr = <-addrc:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("quiver serve exited (%v): %s", p.err, p.logs.String())
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		return nil, errors.New("quiver serve did not print its address")
	}
}

func mustStart(t *testing.T, dataDir string, extra ...string) *proc {
	t.Helper()
	p, err := startProc(dataDir, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(t) })
	return p
}

// kill SIGKILLs the server and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop SIGTERMs the server (if it still runs) and checks it exits 0.
func (p *proc) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("quiver serve did not stop within 60s")
	}
	if p.err != nil {
		t.Errorf("quiver serve exited with %v; log tail:\n%s", p.err, tail(p.logs.String(), 3000))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func dial(addr string) (flight.Client, error) {
	return flight.NewClientWithMiddleware(addr, nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
}

func mustDial(t *testing.T, addr string) flight.Client {
	t.Helper()
	c, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ---- rows -------------------------------------------------------------------

// rowSchema is what every load client puts: id is unique per row over the
// whole run.
var rowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "client", Type: arrow.BinaryTypes.String},
	{Name: "val", Type: arrow.PrimitiveTypes.Float64},
}, nil)

func rowsBatch(start, n int64, client string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, rowSchema)
	defer b.Release()
	for i := int64(0); i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(start + i)
		b.Field(1).(*array.StringBuilder).Append(client)
		b.Field(2).(*array.Float64Builder).Append(float64(start+i) * 0.5)
	}
	return b.NewRecordBatch()
}

// ---- Flight calls -----------------------------------------------------------

type putResult struct {
	Path      string `json:"path"`
	Version   string `json:"version"`
	Index     int    `json:"index"`
	Rows      int64  `json:"rows"`
	RequestID string `json:"request_id"`
}

func cmdDesc(v any) *flight.FlightDescriptor {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b}
}

// put sends recs as one DoPut and returns the PutResult.
func put(ctx context.Context, c flight.Client, desc *flight.FlightDescriptor, sc *arrow.Schema, recs ...arrow.RecordBatch) (*putResult, error) {
	stream, err := c.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(sc))
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
	for { // drain to EOF
		if _, err := stream.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("after PutResult: %w", err)
			}
			break
		}
	}
	return &pr, nil
}

// readIDs reads the id column of one version of a profile.
func readIDs(ctx context.Context, c flight.Client, path, version string) ([]int64, error) {
	tk, _ := json.Marshal(map[string]any{"path": path, "version": version, "columns": []string{"id"}})
	stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: tk})
	if err != nil {
		return nil, err
	}
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	var out []int64
	for rdr.Next() {
		r := rdr.RecordBatch()
		out = append(out, r.Column(0).(*array.Int64).Int64Values()...)
	}
	return out, rdr.Err()
}

// action runs a DoAction and returns the bodies of its results.
func action(ctx context.Context, c flight.Client, typ string, body any) ([][]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	stream, err := c.DoAction(ctx, &flight.Action{Type: typ, Body: b})
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r.Body)
	}
}

type versionList struct {
	Path     string `json:"path"`
	Latest   string `json:"latest"`
	Versions []struct {
		Version string `json:"version"`
		Rows    int64  `json:"rows"`
		Files   int    `json:"files"`
	} `json:"versions"`
}

func listVersions(ctx context.Context, c flight.Client, path string) (*versionList, error) {
	res, err := action(ctx, c, "list-versions", map[string]any{"path": path})
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("list-versions: %d results", len(res))
	}
	var vl versionList
	return &vl, json.Unmarshal(res[0], &vl)
}

type verifyReport struct {
	OK       bool `json:"ok"`
	Checked  int  `json:"checked_files"`
	Problems []struct {
		Kind   string `json:"kind"`
		Path   string `json:"path"`
		Detail string `json:"detail"`
	} `json:"problems"`
}

func (v *verifyReport) kinds() map[string]int {
	m := map[string]int{}
	for _, p := range v.Problems {
		m[p.Kind]++
	}
	return m
}

func verify(ctx context.Context, c flight.Client, body any) (*verifyReport, error) {
	res, err := action(ctx, c, "verify", body)
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("verify: %d results", len(res))
	}
	var vr verifyReport
	return &vr, json.Unmarshal(res[0], &vr)
}

func codeName(err error) string {
	if err == nil {
		return "OK"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return codes.DeadlineExceeded.String()
	}
	return status.Code(err).String()
}

// ---- figures ----------------------------------------------------------------

type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) pct(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), l.d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return s[i]
}

type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counter) inc(k string) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
	c.mu.Unlock()
}

func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.m))
	for k := range c.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", k, c.m[k])
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// report prints a figure line both to the test log and to stdout with a
// stable prefix, so a run's figures can be grepped out of `go test -v`.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	fmt.Printf("FIGURE %s: %s\n", t.Name(), line)
}

func newRand() *rand.Rand { return rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
