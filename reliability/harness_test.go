package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	bin, err := quivertest.Build(false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	if out, err := exec.Command(filepath.Join(repo, "scripts", "pyenv.sh")).Output(); err == nil {
		python = strings.TrimSpace(string(out))
	}
	fmt.Printf("reliability: scale %+v\n", sc)
	code := m.Run()
	os.RemoveAll(filepath.Dir(bin))
	os.Exit(code)
}

func requireStress(t *testing.T) {
	t.Helper()
	if !enabled {
		t.Skip("QUIVER_STRESS_SCALE unset")
	}
}

// ---- one server process -----------------------------------------------------

// proc is one `quiver serve` (quivertest.Proc) with the names the suite
// uses.
type proc struct {
	*quivertest.Proc
	addr string
	cmd  *exec.Cmd
}

// startProc runs `quiver serve` on 127.0.0.1:0 over the local dataDir and
// waits for its "quiver: serving DIR on ADDR" line.
func startProc(dataDir string, extra ...string) (*proc, error) {
	return startProcOn(quivertest.Local(dataDir), extra...)
}

// startProcOn is startProc over any storage (a bucket).
func startProcOn(st quivertest.Storage, extra ...string) (*proc, error) {
	p, err := quivertest.Start(binary, st, extra...)
	if err != nil {
		return nil, err
	}
	return &proc{Proc: p, addr: p.Addr, cmd: p.Cmd}, nil
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
func (p *proc) kill() { p.Kill() }

// stop SIGTERMs the server (if it still runs) and checks it exits 0.
func (p *proc) stop(t *testing.T) {
	if err := p.Stop(60 * time.Second); err != nil {
		t.Errorf("%v; log tail:\n%s", err, tail(p.Logs(), 3000))
	}
}

func tail(s string, n int) string { return quivertest.Tail(s, n) }

// dial connects a Go client to addr that never retries (a test sees, and
// classifies, every attempt's own outcome; the model test and the workload
// retry by themselves, recording each attempt) and accepts messages up to
// 64 MiB.
func dial(addr string) (*client.Client, error) {
	return client.Connect(context.Background(), addr, client.WithRetry(client.RetryPolicy{}), client.WithMaxRecvMsgSize(64<<20))
}

// mustDial is dial that fails t and closes the client when its test ends.
func mustDial(t *testing.T, addr string) *client.Client {
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

type putResult = catalog.PutResult

func cmdDesc(v any) *flight.FlightDescriptor { return quivertest.CmdDesc(v) }

// put sends recs (of schema sc) to the profile at path as one put and
// returns the PutResult.
func put(ctx context.Context, c *client.Client, path string, opts client.PutOptions, sc *arrow.Schema, recs ...arrow.RecordBatch) (*putResult, error) {
	rdr, err := array.NewRecordReader(sc, recs)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	return c.Put(ctx, path, rdr, opts)
}

// rawPut sends recs as one DoPut to desc as it is, for what the client
// would not send (malformed descriptors, batches of another schema, one
// message per batch whatever its size).
func rawPut(ctx context.Context, c *client.Client, desc *flight.FlightDescriptor, sc *arrow.Schema, recs ...arrow.RecordBatch) (*putResult, error) {
	return quivertest.Put(ctx, c.Flight(), desc, sc, recs...)
}

// readIDs reads the id column of one version of a profile.
func readIDs(ctx context.Context, c *client.Client, path, version string) ([]int64, error) {
	rdr, err := c.Read(ctx, client.ReadRequest{Path: path, Version: version, Columns: []string{"id"}})
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

// action runs a DoAction with body as JSON and returns the bodies of its
// results as the server sent them (those that came before an error too).
func action(ctx context.Context, c *client.Client, typ string, body any) ([][]byte, error) {
	if body == nil {
		body = []byte(nil) // no body, as before
	}
	var out [][]byte
	err := c.DoAction(ctx, typ, body, func(b []byte) error {
		out = append(out, b)
		return nil
	})
	return out, err
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

func listVersions(ctx context.Context, c *client.Client, path string) (*versionList, error) {
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

func verify(ctx context.Context, c *client.Client, body any) (*verifyReport, error) {
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
