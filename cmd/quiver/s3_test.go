package main

// The real binary on a real S3 server (versitygw, internal/s3test):
// `quiver serve --data-dir s3://…` puts and gets, three servers sharing one
// bucket under concurrent appends with one of them SIGKILLed mid-load,
// and the offline admin commands on the bucket.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/internal/quivertest"
	"github.com/quiverdb/quiver/internal/s3test"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// TestMain removes the binary quiverBinary built, if any.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// quiverBinary builds this command once per test binary.
func quiverBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() { binPath, binErr = quivertest.Build(false) })
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// s3Env is one bucket on a versitygw and how the binary reaches it.
type s3Env struct {
	srv     *s3test.Server
	st      quivertest.Storage
	dataDir string
	flags   []string
	env     []string
}

func newS3Env(t *testing.T) *s3Env {
	srv := s3test.Start(t)
	st := quivertest.S3(t, srv)
	return &s3Env{srv: srv, st: st, dataDir: st.DataDir, flags: st.Flags, env: append(os.Environ(), st.Env...)}
}

// quiverServer is one `quiver serve` process and a client of it.
type quiverServer struct {
	*quivertest.Proc
	addr   string
	client *client.Client
}

func (e *s3Env) serve(t *testing.T) *quiverServer {
	t.Helper()
	p := quivertest.MustStart(t, quiverBinary(t), e.st, "--lock-timeout", "30s")
	s := &quiverServer{Proc: p, addr: p.Addr}
	var err error
	if s.client, err = client.Connect(t.Context(), s.addr, client.WithRetry(client.RetryPolicy{})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.client.Close() }) // before the server's stop (cleanups run last first)
	return s
}

func (s *quiverServer) log() string { return s.Logs() }

// stop sends SIGTERM and wants a clean exit (unless killed before).
func (s *quiverServer) stop(t *testing.T) {
	if err := s.Stop(quivertest.StopTimeout); err != nil {
		t.Errorf("%v: %s", err, s.log())
	}
}

func (s *quiverServer) kill() { s.Kill() }

// admin runs an offline admin command on the bucket and decodes its JSON.
func (e *s3Env) admin(t *testing.T, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(quiverBinary(t), append(append(args, "--data-dir", e.dataDir, "--json"), e.flags...)...)
	cmd.Env = e.env
	b, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("quiver %v: %v\n%s%s", args, err, b, stderr)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("quiver %v: %v: %s", args, err, b)
	}
}

var idSchema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)

func idBatch(vals []int64) array.RecordReader {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(vals, nil)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(idSchema, []arrow.Array{col}, int64(len(vals)))
	defer rec.Release()
	rdr, _ := array.NewRecordReader(idSchema, []arrow.RecordBatch{rec})
	return rdr
}

func putIDs(ctx context.Context, c *client.Client, path, mode string, vals []int64) (*catalog.PutResult, error) {
	rdr := idBatch(vals)
	defer rdr.Release()
	return c.Put(ctx, path, rdr, client.PutOptions{Mode: mode})
}

func readIDs(t *testing.T, c *client.Client, path string) []int64 {
	t.Helper()
	rdr, err := c.Read(t.Context(), client.ReadRequest{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var out []int64
	for rdr.Next() {
		out = append(out, rdr.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestServeOnS3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts versitygw and three servers")
	}
	e := newS3Env(t)
	servers := []*quiverServer{e.serve(t), e.serve(t), e.serve(t)}
	ctx := t.Context()

	// Puts through one server, gets through the others.
	if _, err := putIDs(ctx, servers[0].client, "sales/orders", catalog.ModeWrite, []int64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := putIDs(ctx, servers[1].client, "sales/orders", catalog.ModeAppend, []int64{4}); err != nil {
		t.Fatal(err)
	}
	for i, s := range servers {
		if got := readIDs(t, s.client, "sales/orders"); !slices.Equal(got, []int64{1, 2, 3, 4}) {
			t.Fatalf("server %d reads %v", i, got)
		}
	}

	// Concurrent appends through all three. Server 2 is SIGKILLed while
	// puts through it are in flight, once a third of the puts are
	// acknowledged; its workers go on through the others. Every
	// acknowledged row must be read exactly once, and no row twice.
	const workers, puts, rows = 6, 15, 5
	var (
		mu        sync.Mutex
		acked     = map[int64]bool{}
		attempted = map[int64]bool{}
		killed    atomic.Bool
		nacked    atomic.Int32
		inflight2 atomic.Int32 // puts through server 2 in progress
		lost      atomic.Int32 // puts that died with it
		wg        sync.WaitGroup
	)
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		// Both of server 2's workers in flight if that comes soon enough
		// (one alone may finish its put before the kill lands, on a
		// loaded machine), else one.
		for {
			n, f := nacked.Load(), inflight2.Load()
			if n >= workers*puts/3 && (f >= 2 || (f >= 1 && n >= workers*puts/2)) {
				break
			}
			if n >= workers*puts-workers {
				break // too late to kill mid-load: the test fails below
			}
			time.Sleep(time.Millisecond)
		}
		killed.Store(true)
		servers[2].kill()
	}()
	for w := range workers {
		wg.Go(func() {
			for p := range puts {
				// Puts through server 2 are large enough (tens of ms)
				// that the kill lands while one is in flight.
				n := rows
				if w%3 == 2 {
					n = 20_000
				}
				vals := make([]int64, n)
				for r := range vals {
					vals[r] = int64(w*100_000_000 + p*1_000_000 + r)
				}
				s := servers[w%3]
				if s == servers[2] && killed.Load() {
					s = servers[w%2]
				}
				mu.Lock()
				for _, v := range vals {
					attempted[v] = true
				}
				mu.Unlock()
				if s == servers[2] {
					inflight2.Add(1)
				}
				_, err := putIDs(ctx, s.client, "load", catalog.ModeAppend, vals)
				if s == servers[2] {
					inflight2.Add(-1)
				}
				if err != nil {
					if s == servers[2] && killed.Load() {
						lost.Add(1) // died with the server: maybe committed, never acknowledged
						continue
					}
					t.Errorf("worker %d put %d through server %d: %v", w, p, slices.Index(servers, s), err)
					return
				}
				mu.Lock()
				for _, v := range vals {
					acked[v] = true
				}
				mu.Unlock()
				nacked.Add(1)
			}
		})
	}
	wg.Wait()
	<-killerDone
	if lost.Load() == 0 {
		t.Error("no put was in flight through server 2 when it was killed")
	}
	got := readIDs(t, servers[0].client, "load")
	seen := map[int64]int{}
	for _, v := range got {
		seen[v]++
		if !attempted[v] {
			t.Errorf("row %d was never put", v)
		}
	}
	for v, n := range seen {
		if n > 1 {
			t.Errorf("row %d read %d times", v, n)
		}
	}
	for v := range acked {
		if seen[v] != 1 {
			t.Errorf("acknowledged row %d read %d times, want once", v, seen[v])
		}
	}
	t.Logf("%d rows acknowledged, %d read, %d attempted; %d puts died with the killed server", len(acked), len(got), len(attempted), lost.Load())
	if got2 := readIDs(t, servers[1].client, "load"); len(got2) != len(got) {
		t.Errorf("server 1 reads %d rows, server 0 %d", len(got2), len(got))
	}

	// With the servers stopped, the offline admin commands work on the
	// bucket: sweep removes what the killed server left, verify is clean.
	servers[0].stop(t)
	servers[1].stop(t)
	var sweep catalog.SweepResult
	e.admin(t, &sweep, "sweep", "--older-than", "0s")
	t.Logf("sweep removed %d: %v", len(sweep.Removed), sweep.Removed)
	var ver catalog.VerifyResult
	e.admin(t, &ver, "verify")
	if !ver.OK {
		t.Fatalf("verify after sweep: %+v", ver)
	}
	var vers catalog.ListVersionsResult
	e.admin(t, &vers, "versions", "sales/orders")
	if len(vers.Versions) != 1 {
		t.Errorf("versions: %+v", vers)
	}

	// A new server has no local state to miss: it reads everything.
	s := e.serve(t)
	if got3 := readIDs(t, s.client, "load"); len(got3) != len(got) {
		t.Errorf("a new server reads %d rows, want %d", len(got3), len(got))
	}
}

// TestServeRefusesBadS3: a bucket that does not exist, or an s3:// URL
// that does not parse, stops serve at start with an error that does not
// leak the endpoint.
func TestServeRefusesBadS3(t *testing.T) {
	e := newS3Env(t)
	for _, c := range []struct {
		dataDir, want string
	}{
		{"s3://no-such-bucket-here/x", "NoSuchBucket"},
		{"s3://Bad_Bucket", "bad URL"},
		{"s3://bucket/../x", "bad URL"},
	} {
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", c.dataDir}, e.flags...)
		cmd := exec.Command(quiverBinary(t), args...)
		cmd.Env = e.env
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s: serve started", c.dataDir)
			continue
		}
		if !strings.Contains(string(out), c.want) || strings.Contains(string(out), e.srv.Endpoint) {
			t.Errorf("%s: output %q; want %q and no endpoint", c.dataDir, out, c.want)
		}
	}
	// An offline command on a prefix that holds nothing.
	cmd := exec.Command(quiverBinary(t), append([]string{"verify", "--data-dir", e.dataDir + "-typo"}, e.flags...)...)
	cmd.Env = e.env
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "does not exist") {
		t.Errorf("verify of an empty prefix: %v, %s", err, out)
	}
}
