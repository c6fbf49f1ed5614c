package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/internal/quivertest"
)

// cluster is N servers over one data dir; servers may be killed and
// replaced while clients run.
type cluster struct {
	t        *testing.T
	st       quivertest.Storage // what the servers share
	dataDir  string             // where its files lie on this machine
	extra    []string
	addrFile string // the live addresses, one a line, for pyarrow clients

	mu       sync.Mutex
	procs    []*proc
	clients  []*client.Client
	inflight []*atomic.Int64
}

func newCluster(t *testing.T, n int, extra ...string) *cluster {
	return newClusterOn(t, quivertest.Local(t.TempDir()), n, extra...)
}

// newClusterOn is a cluster of n servers sharing the storage st (a
// directory or a bucket).
func newClusterOn(t *testing.T, st quivertest.Storage, n int, extra ...string) *cluster {
	c := &cluster{t: t, st: st, dataDir: st.Dir, extra: extra, addrFile: filepath.Join(t.TempDir(), "addrs")}
	for i := 0; i < n; i++ {
		p, err := startProcOn(st, extra...)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := dial(p.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.procs = append(c.procs, p)
		c.clients = append(c.clients, cl)
		c.inflight = append(c.inflight, &atomic.Int64{})
	}
	c.writeAddrs()
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, p := range c.procs {
			c.clients[i].Close()
			p.stop(t)
		}
	})
	return c
}

func (c *cluster) writeAddrs() {
	var b strings.Builder
	for _, p := range c.procs {
		b.WriteString(p.addr + "\n")
	}
	tmp := c.addrFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err == nil {
		_ = os.Rename(tmp, c.addrFile)
	}
}

// pick returns a random server's client and its slot.
func (c *cluster) pick(r *rand.Rand) (int, *client.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := r.IntN(len(c.procs))
	return i, c.clients[i]
}

// killAndRestart SIGKILLs server i and starts a replacement on the same
// data dir. It returns how many puts were in flight on the victim.
func (c *cluster) killAndRestart(i int) (int64, error) {
	c.mu.Lock()
	old, oldCl := c.procs[i], c.clients[i]
	inflight := c.inflight[i].Load()
	c.mu.Unlock()
	old.kill()
	p, err := startProcOn(c.st, c.extra...)
	if err != nil {
		return inflight, err
	}
	cl, err := dial(p.addr)
	if err != nil {
		return inflight, err
	}
	c.mu.Lock()
	c.procs[i], c.clients[i] = p, cl
	c.inflight[i] = &atomic.Int64{}
	c.writeAddrs()
	c.mu.Unlock()
	time.AfterFunc(5*time.Second, func() { oldCl.Close() })
	return inflight, nil
}

func (c *cluster) any() *client.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clients[0]
}

// ---- the ledger of what clients were told -----------------------------------

// putRec is one logical put (one request id) and its outcome.
type putRec struct {
	Req      string   `json:"req"`
	Profile  string   `json:"profile"`
	Mode     string   `json:"mode"`
	Start    int64    `json:"start"`
	N        int64    `json:"n"`
	Acked    bool     `json:"ok"`
	Version  string   `json:"version"`
	Index    int      `json:"index"`
	Replayed bool     `json:"replayed"`
	Attempts int      `json:"attempts"`
	LatMS    float64  `json:"lat_ms"`
	Codes    []string `json:"codes"`
	Client   string   `json:"client"`
}

type ledger struct {
	mu   sync.Mutex
	recs []putRec
}

func (l *ledger) add(r putRec) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
}

// ---- Go workers -------------------------------------------------------------

type workload struct {
	c        *cluster
	profiles []string
	pWrite   float64
	maxRows  int64
	nextID   atomic.Int64
	led      ledger
	lat      latencies
	errs     counter
	puts     atomic.Int64
	breaks   atomic.Int64
	stop     atomic.Bool   // set to end the workers early
	attempts int           // per logical put
	retryFor time.Duration // keep retrying a put this long after the deadline
}

func newWorkload(c *cluster, profiles []string) *workload {
	return &workload{c: c, profiles: profiles, pWrite: 0.03, maxRows: 200, attempts: 40, retryFor: 60 * time.Second}
}

// worker puts until deadline; every put is retried with its request_id on
// a random server until acknowledged.
func (w *workload) worker(ctx context.Context, id int, deadline time.Time) {
	r := newRand()
	name := fmt.Sprintf("go%d", id)
	for seq := 0; time.Now().Before(deadline) && ctx.Err() == nil && !w.stop.Load(); seq++ {
		n := 1 + r.Int64N(w.maxRows)
		start := w.nextID.Add(n) - n
		rec := putRec{Req: fmt.Sprintf("%s-%d", name, seq), Profile: w.profiles[r.IntN(len(w.profiles))], Mode: "append", Start: start, N: n, Client: name}
		if r.Float64() < w.pWrite {
			rec.Mode = "write"
		}
		w.one(ctx, r, &rec, deadline.Add(w.retryFor))
		w.led.add(rec)
	}
}

func (w *workload) one(ctx context.Context, r *rand.Rand, rec *putRec, giveUp time.Time) {
	batch := rowsBatch(rec.Start, rec.N, rec.Client)
	defer batch.Release()
	opts := client.PutOptions{Mode: rec.Mode, RequestID: rec.Req, Metadata: map[string]any{"client": rec.Client}}
	for rec.Attempts < w.attempts && time.Now().Before(giveUp) && ctx.Err() == nil {
		rec.Attempts++
		slot, cl := w.c.pick(r)
		w.c.mu.Lock()
		inflight := w.c.inflight[slot]
		w.c.mu.Unlock()
		inflight.Add(1)
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		t0 := time.Now()
		pr, err := put(cctx, cl, rec.Profile, opts, rowSchema, batch)
		d := time.Since(t0)
		cancel()
		inflight.Add(-1)
		w.puts.Add(1)
		if err == nil {
			if pr.RequestID != rec.Req || pr.Rows != rec.N {
				w.errs.inc("BadAck")
				rec.Codes = append(rec.Codes, fmt.Sprintf("BadAck(%s,%d)", pr.RequestID, pr.Rows))
				return
			}
			rec.Acked, rec.Version, rec.Index, rec.LatMS = true, pr.Version, pr.Index, float64(d.Microseconds())/1000
			w.lat.add(d)
			return
		}
		code := codeName(err)
		w.errs.inc(code)
		rec.Codes = append(rec.Codes, code)
		if rec.Attempts == w.attempts/2 {
			rec.Codes = append(rec.Codes, err.Error()) // a sample message for the report
		}
		switch status.Code(err) {
		case codes.InvalidArgument, codes.FailedPrecondition, codes.NotFound, codes.PermissionDenied:
			rec.Codes = append(rec.Codes, err.Error())
			return // not retryable: the checker reports it
		case codes.Unavailable:
			if strings.Contains(err.Error(), "locked by another writer") {
				// A server killed while holding the manifest lock: break
				// it (only broken if its owner is provably gone).
				bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
				if res, err := action(bctx, cl, "break-lock", map[string]any{"path": rec.Profile}); err == nil && len(res) == 1 && strings.Contains(string(res[0]), `"broken":true`) {
					w.breaks.Add(1)
				}
				bcancel()
			}
		}
		// Back off exponentially (to 1 s): under a kill storm a burst of
		// fast retries all land on servers that are down and restarting.
		backoff := min(10*time.Millisecond<<min(rec.Attempts, 7), time.Second)
		time.Sleep(backoff/2 + time.Duration(r.Int64N(int64(backoff/2))))
	}
}

// ---- pyarrow clients --------------------------------------------------------

type pyProc struct {
	cmd *exec.Cmd
	out []putRec
	err error
	raw strings.Builder
	wg  sync.WaitGroup
}

// startPy runs reliability/pyclient.py; ids from base.
func startPy(t *testing.T, addrFile, name string, base int64, dur time.Duration, profiles []string, pWrite float64) *pyProc {
	if python == "" {
		t.Fatal("no python venv (scripts/pyenv.sh)")
	}
	pp := &pyProc{}
	pp.cmd = exec.Command(python, filepath.Join(repo, "reliability", "pyclient.py"),
		"--addr-file", addrFile, "--name", name, "--base", fmt.Sprint(base),
		"--seconds", fmt.Sprintf("%.1f", dur.Seconds()), "--profiles", strings.Join(profiles, ","),
		"--p-write", fmt.Sprint(pWrite))
	stdout, err := pp.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	pp.cmd.Stderr = &pp.raw
	if err := pp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pp.wg.Add(1)
	go func() {
		defer pp.wg.Done()
		s := bufio.NewScanner(stdout)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			var r putRec
			if err := json.Unmarshal(s.Bytes(), &r); err != nil {
				pp.err = fmt.Errorf("pyclient line %q: %v", s.Text(), err)
				continue
			}
			pp.out = append(pp.out, r)
		}
	}()
	return pp
}

func (pp *pyProc) wait() error {
	pp.wg.Wait()
	if err := pp.cmd.Wait(); err != nil {
		return fmt.Errorf("pyclient: %v: %s", err, tail(pp.raw.String(), 2000))
	}
	return pp.err
}

// ---- the checker ------------------------------------------------------------

type checkResult struct {
	ackedPuts, gaveUp   int
	ackedRows, readRows int64
	unackedVisibleRows  int64
	dupRows             int64
	dupPuts             int
	missingRows         int64 // acknowledged, not readable
	misplacedRows       int64 // acknowledged, readable in another version
	phantomRows         int64 // readable, never put
	emptyVersions       int   // listed versions with no files (abandoned writes)
	versions            int
	problems            []string
}

func (cr *checkResult) fail(format string, args ...any) {
	if len(cr.problems) < 50 {
		cr.problems = append(cr.problems, fmt.Sprintf(format, args...))
	} else if len(cr.problems) == 50 {
		cr.problems = append(cr.problems, "… more problems omitted")
	}
}

// check reads every version of every profile and compares with the ledger:
// every acknowledged row readable exactly once, in the version its ack
// named; no row read twice; no row nobody put; every write's version
// distinct.
func check(ctx context.Context, c *client.Client, profiles []string, recs []putRec) *checkResult {
	cr := &checkResult{}
	type loc struct {
		version string
		count   int
	}
	seen := map[int64]*loc{}
	for _, p := range profiles {
		vl, err := listVersions(ctx, c, p)
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			cr.fail("list-versions %s: %v", p, err)
			continue
		}
		for _, v := range vl.Versions {
			cr.versions++
			if v.Files == 0 && v.Rows == 0 {
				cr.emptyVersions++
				continue
			}
			ids, err := readIDs(ctx, c, p, v.Version)
			if err != nil {
				cr.fail("read %s %s: %v", p, v.Version, err)
				continue
			}
			if int64(len(ids)) != v.Rows {
				cr.fail("%s %s: list-versions says %d rows, DoGet returned %d", p, v.Version, v.Rows, len(ids))
			}
			for _, id := range ids {
				cr.readRows++
				if l, ok := seen[id]; ok {
					l.count++
				} else {
					seen[id] = &loc{version: p + "@" + v.Version, count: 1}
				}
			}
		}
	}
	owned := map[int64]bool{}
	writeVersions := map[string]string{}
	for _, r := range recs {
		if r.Acked {
			cr.ackedPuts++
			cr.ackedRows += r.N
			if r.Mode == "write" {
				key := r.Profile + "@" + r.Version
				if other, ok := writeVersions[key]; ok {
					cr.fail("writes %s and %s both acknowledged as %s", other, r.Req, key)
				}
				writeVersions[key] = r.Req
			}
		} else {
			cr.gaveUp++
		}
		var dups int
		var dupIn string
		for id := r.Start; id < r.Start+r.N; id++ {
			owned[id] = true
			l := seen[id]
			switch {
			case r.Acked && l == nil:
				cr.missingRows++
				cr.fail("acknowledged put %s (%s %s index %d): row %d not readable", r.Req, r.Profile, r.Version, r.Index, id)
			case r.Acked && l.version != r.Profile+"@"+r.Version:
				cr.misplacedRows++
				cr.fail("acknowledged put %s: row %d in %s, ack said %s@%s", r.Req, id, l.version, r.Profile, r.Version)
			case !r.Acked && l != nil:
				cr.unackedVisibleRows++
			}
			if l != nil && l.count > 1 {
				dups++
				dupIn = fmt.Sprintf("%s (%d times)", l.version, l.count)
			}
		}
		if dups > 0 {
			cr.dupRows += int64(dups)
			cr.dupPuts++
			cr.fail("put %s (acked=%v as %s index %d, attempts %d, codes %v): %d of its %d rows read more than once, in %s",
				r.Req, r.Acked, r.Version, r.Index, r.Attempts, r.Codes, dups, r.N, dupIn)
		}
	}
	for id, l := range seen {
		if !owned[id] {
			cr.phantomRows++
			cr.fail("row %d in %s was never put", id, l.version)
		}
	}
	return cr
}

// ---- manifest poller ----------------------------------------------------------

// pollManifests reads every profile's manifest.json straight from disk
// until stop is closed: it must always parse and never move backwards.
func pollManifests(dataDir string, profiles []string, stop <-chan struct{}) (polls *atomic.Int64, errs *[]string, done <-chan struct{}) {
	polls = &atomic.Int64{}
	var mu sync.Mutex
	var problems []string
	d := make(chan struct{})
	go func() {
		defer close(d)
		last := map[string]int{}
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			for _, p := range profiles {
				b, err := os.ReadFile(filepath.Join(dataDir, filepath.FromSlash(p), "manifest.json"))
				if err != nil {
					continue // not created yet
				}
				polls.Add(1)
				var m struct {
					Latest string `json:"latest_data_dir"`
				}
				var n int
				if err := json.Unmarshal(b, &m); err != nil || len(m.Latest) < 2 || m.Latest[0] != 'v' {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("%s: manifest %q does not parse", p, b))
					mu.Unlock()
					continue
				}
				fmt.Sscan(m.Latest[1:], &n)
				if prev, ok := last[p]; ok && n < prev {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("%s: manifest went back from v%d to v%d", p, prev, n))
					mu.Unlock()
				}
				if n > last[p] {
					last[p] = n
				}
			}
		}
	}()
	return polls, &problems, d
}
