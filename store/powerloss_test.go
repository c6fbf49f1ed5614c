package store_test

// Power-loss evidence for the commit protocol: the store runs over
// crashfs (store/fsys/crashfs), which models what a machine crash would
// leave of the disk (only what was synced: file contents by fsync, names
// by a sync of their directory), while several writers put concurrently:
//
//   - three small appenders (grouped into shared files by the commit
//     cycle, store/group.go) and one large appender (a file of its own)
//     on an unpartitioned profile, which they create by racing first
//     appends;
//   - a writer of new versions (ModeWrite) on that profile, so that
//     appends are re-targeted;
//   - partitioned writes and appends to them on a second profile.
//
// At random moments a crash image is taken (a consistent cut, while the
// writers are mid-put). Each image is then opened by a fresh store, as a
// server rebooted after the power loss would, and must show:
//
//   - every put acknowledged before the cut, exactly once, byte for byte
//     in the log and row for row (every column) in its version; an
//     acknowledged write is the latest version or below it;
//   - no half-visible put: the log is one unbroken chain, every version
//     listed (and the latest) reads without error, and it reads exactly
//     the rows of the records the log holds for it (a put in flight at
//     the cut is either whole or absent);
//   - Verify reports nothing but what a crash may leave: uncommitted files
//     of the puts in flight (orphan), temps (stale_temp) and a lock that
//     was made durable while held (stale_lock); after a put (which takes
//     over the lock) and Sweep(0), nothing at all;
//   - a retried put of an acknowledged request id is answered from the
//     log (replayed), not written again.
//
// QUIVER_POWERLOSS_CRASHES=N sets the number of crash images (default 6;
// QUIVER_STRESS=1 makes it 40, -short or QUIVER_STRESS=0 3);
// QUIVER_POWERLOSS_SEED fixes the random choices.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/crashfs"
	"github.com/quiverdb/quiver/store/maint"
)

// plPut is one put of the power-loss test: its rows are crashBatches(gen,
// seq, rows).
type plPut struct {
	keys     []string
	gen, seq int64
	rows     int
	mode     store.Mode
	part     bool // a partitioned write
}

func (p plPut) id() string { return fmt.Sprintf("pl-g%d-s%d", p.gen, p.seq) }

func (p plPut) options() store.PutOptions {
	o := store.PutOptions{Mode: p.mode, RequestID: p.id()}
	if p.part {
		o.PartitionBy = []string{"part"}
	}
	return o
}

// plAck is an acknowledged put.
type plAck struct {
	put  plPut
	rec  *store.CommitRecord
	line string
}

// plImage is a crash image and the puts acknowledged before its cut.
type plImage struct {
	dir   string
	acked []plAck
	img   *crashfs.Image
	tear  crashfs.Tear
	at    time.Duration
}

// plRun is the shared state of one run.
type plRun struct {
	mu    sync.Mutex
	puts  map[string]plPut // every put begun, by request id
	acked []plAck
}

func (r *plRun) begin(p plPut) {
	r.mu.Lock()
	r.puts[p.id()] = p
	r.mu.Unlock()
}

func (r *plRun) ack(a plAck) {
	r.mu.Lock()
	r.acked = append(r.acked, a)
	r.mu.Unlock()
}

func (r *plRun) ackedNow() []plAck {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]plAck(nil), r.acked...)
}

func (r *plRun) put(id string) (plPut, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.puts[id]
	return p, ok
}

var (
	plKeysA = []string{"pl", "flat"}
	plKeysB = []string{"pl", "parts"}
)

func TestPowerLoss(t *testing.T) {
	crashes := 6
	switch {
	case stressScale():
		crashes = 40
	case smallScale():
		crashes = 3
	}
	crashes = envInt("QUIVER_POWERLOSS_CRASHES", crashes)
	seed := int64(envInt("QUIVER_POWERLOSS_SEED", int(time.Now().UnixNano()%1e9)))
	t.Logf("%d crash images, seed %d (QUIVER_POWERLOSS_SEED to repeat)", crashes, seed)
	defer func() {
		if t.Failed() {
			t.Logf("failed with seed %d: QUIVER_POWERLOSS_SEED=%d go test -run 'TestPowerLoss$' ./store/", seed, seed)
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	ctx := context.Background()
	start := time.Now()

	l, err := fsys.NewLocal(filepath.Join(t.TempDir(), "live"))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := crashfs.New(ctx, l, crashfs.Options{Seed: uint64(seed)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open("live", store.WithFS(cf), store.WithLockTimeout(time.Minute), store.WithWriter("powerloss"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := &plRun{puts: map[string]plPut{}}
	doPut := func(p plPut) error {
		run.begin(p)
		rdr := crashBatches(p.gen, p.seq, p.rows)
		defer rdr.Release()
		c, err := s.Put(ctx, p.keys, rdr, p.options())
		if err != nil {
			return fmt.Errorf("put gen %d seq %d (%s, %d rows): %w", p.gen, p.seq, p.mode, p.rows, err)
		}
		run.ack(plAck{put: p, rec: c, line: string(c.Line())})
		return nil
	}
	// The partitioned profile exists before its appenders start (an
	// append would create it unpartitioned).
	if err := doPut(plPut{keys: plKeysB, gen: 50, seq: 0, rows: 40, mode: store.ModeWrite, part: true}); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var failed atomic.Bool
	var wg sync.WaitGroup
	writer := func(gen int64, next func(r *rand.Rand, seq int64) (plPut, time.Duration)) {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(seed), uint64(gen)))
			for seq := int64(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				p, pause := next(r, seq)
				p.gen, p.seq = gen, seq
				if err := doPut(p); err != nil {
					t.Errorf("%v", err)
					failed.Store(true)
					return
				}
				if pause > 0 {
					select {
					case <-stop:
						return
					case <-time.After(pause):
					}
				}
			}
		})
	}
	for g := range int64(3) { // small appends: grouped into shared files
		writer(g, func(r *rand.Rand, _ int64) (plPut, time.Duration) {
			return plPut{keys: plKeysA, rows: 1 + r.IntN(300), mode: store.ModeAppend}, time.Duration(r.IntN(20)) * time.Millisecond
		})
	}
	writer(10, func(r *rand.Rand, _ int64) (plPut, time.Duration) { // large appends: a file of their own
		return plPut{keys: plKeysA, rows: 30000 + r.IntN(4000), mode: store.ModeAppend}, time.Duration(200+r.IntN(600)) * time.Millisecond
	})
	writer(20, func(r *rand.Rand, _ int64) (plPut, time.Duration) { // new versions of the flat profile
		return plPut{keys: plKeysA, rows: 10 + r.IntN(500), mode: store.ModeWrite}, time.Duration(200+r.IntN(600)) * time.Millisecond
	})
	writer(30, func(r *rand.Rand, _ int64) (plPut, time.Duration) { // partitioned writes and appends
		p := plPut{keys: plKeysB, rows: 1 + r.IntN(400), mode: store.ModeAppend}
		if r.IntN(4) == 0 {
			p.mode, p.part = store.ModeWrite, true
		}
		return p, time.Duration(r.IntN(50)) * time.Millisecond
	})

	// The crashes: at random moments, a cut of what the disk would hold.
	var images []plImage
	base := t.TempDir()
	for i := 0; i < crashes && !failed.Load(); i++ {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		acked := run.ackedNow() // before the cut: acknowledged before it
		tear := crashfs.Tear(rng.IntN(4))
		dir := filepath.Join(base, fmt.Sprintf("crash%02d", i))
		img, err := cf.CrashWith(dir, tear)
		if err != nil {
			t.Fatalf("crash %d: %v", i, err)
		}
		images = append(images, plImage{dir: dir, acked: acked, img: img, tear: tear, at: time.Since(start)})
	}
	close(stop)
	wg.Wait()
	if err := cf.Check(ctx); err != nil {
		t.Errorf("the crash model lost track of the disk: %v", err)
	}
	all := run.ackedNow()
	t.Logf("workload: %d puts acknowledged in %s", len(all), time.Since(start).Round(time.Millisecond))
	if t.Failed() {
		t.FailNow()
	}

	var stats plStats
	for i, im := range images {
		t.Run(fmt.Sprintf("crash%02d", i), func(t *testing.T) {
			t.Logf("cut at %s, tear %d, %d puts acknowledged before it; image %d files, %d dirs; %d names lost, %d revived, %d files torn %v",
				im.at.Round(time.Millisecond), im.tear, len(im.acked), im.img.Files, im.img.Dirs, im.img.Lost, im.img.Revived, im.img.Torn, im.img.LostNames)
			plCheckImage(t, run, im, rng, &stats)
		})
	}
	t.Logf("%d images checked in %s: %d acknowledged puts checked, %d puts in flight found committed, %d retries replayed; "+
		"left by the crashes: %d uncommitted files, %d temps, %d manifest locks (%d empty), %d manifests behind the log",
		len(images), time.Since(start).Round(time.Millisecond), stats.acked, stats.unacked, stats.replayed,
		stats.orphans, stats.temps, stats.locks, stats.emptyLocks, stats.lagging)
}

type plStats struct {
	acked, unacked, replayed, orphans, temps, locks, emptyLocks, lagging int
}

// plCheckImage opens a crash image as a restarted server would and checks
// it (see the top of the file).
func plCheckImage(t *testing.T, run *plRun, im plImage, rng *rand.Rand, stats *plStats) {
	ctx := context.Background()
	t0 := time.Now()
	// A rebooted machine: the locks a crash kept name an owner of another
	// boot, which only age can judge; this server treats them as stale at
	// once (as an operator's break-lock would), and counts them.
	s, err := store.Open(im.dir, store.WithHost("rebooted"), store.WithLockTimeout(30*time.Second),
		store.WithLockStaleAfter(time.Millisecond), store.WithWriter("after-crash"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ackedBy := map[string]plAck{}
	for _, a := range im.acked {
		ackedBy[a.put.id()] = a
	}
	for _, keys := range [][]string{plKeysA, plKeysB} {
		pdir := filepath.Join(im.dir, filepath.Join(keys...))
		plCheckProfile(t, s, run, keys, pdir, ackedBy, stats)
	}
	if t.Failed() {
		return
	}
	tRead := time.Since(t0)
	// Verify: only what a crash may leave.
	rep, err := maint.Verify(ctx, s, maint.VerifyOptions{StaleAfter: time.Nanosecond})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	for _, p := range rep.Problems {
		switch p.Kind {
		case maint.ProblemOrphan:
			stats.orphans++
		case maint.ProblemStaleTemp:
			stats.temps++
		case maint.ProblemStaleLock:
			stats.locks++
			if b, err := os.ReadFile(filepath.Join(im.dir, filepath.FromSlash(p.Path))); err == nil && len(b) == 0 {
				stats.emptyLocks++
			}
		default:
			t.Errorf("verify after the crash: %s %s: %s", p.Kind, p.Path, p.Detail)
		}
	}
	// The restarted server writes: a put to each profile gets in (taking
	// over a lock the crash kept), retries of acknowledged puts are
	// replayed, sweep removes what the crash left, and then verify finds
	// nothing.
	for k, keys := range [][]string{plKeysA, plKeysB} {
		p := plPut{keys: keys, gen: 90 + int64(k), seq: 0, rows: 5, mode: store.ModeAppend}
		if _, err := plPutAfterCrash(t, s, p); err != nil {
			t.Errorf("put after the crash to %v: %v", keys, err)
		}
	}
	for range min(4, len(im.acked)) {
		a := im.acked[rng.IntN(len(im.acked))]
		c, err := plPutAfterCrash(t, s, a.put)
		switch {
		case err != nil:
			t.Errorf("retry of acknowledged %s after the crash: %v", a.put.id(), err)
		case !c.Replayed || string(c.Line()) != a.line:
			t.Errorf("retry of acknowledged %s after the crash was not replayed from its record (replayed %v, seq %d, acknowledged as %d)", a.put.id(), c.Replayed, c.Seq, a.rec.Seq)
		default:
			stats.replayed++
		}
	}
	sw, err := maint.Sweep(ctx, s, 0)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if len(sw.Skipped) > 0 {
		t.Errorf("sweep skipped %+v", sw.Skipped)
	}
	rep, err = maint.Verify(ctx, s, maint.VerifyOptions{StaleAfter: time.Nanosecond})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	for _, p := range rep.Problems {
		t.Errorf("verify after sweep: %s %s: %s", p.Kind, p.Path, p.Detail)
	}
	t.Logf("checked in %s (reads %s)", time.Since(t0).Round(time.Millisecond), tRead.Round(time.Millisecond))
}

// plPutAfterCrash puts p on the store opened over a crash image.
func plPutAfterCrash(t *testing.T, s *store.Store, p plPut) (*store.CommitRecord, error) {
	t.Helper()
	rdr := crashBatches(p.gen, p.seq, p.rows)
	defer rdr.Release()
	return s.Put(context.Background(), p.keys, rdr, p.options())
}

// plCheckProfile checks one profile of a crash image: the log, the
// manifest, and every version's rows.
func plCheckProfile(t *testing.T, s *store.Store, run *plRun, keys []string, pdir string, ackedBy map[string]plAck, stats *plStats) {
	t.Helper()
	ctx := context.Background()
	prof := strings.Join(keys, "/")
	dl := readDiskLog(t, pdir)
	for _, p := range dl.problems {
		t.Errorf("%s: commit log after the crash: %s", prof, p)
	}
	// Every acknowledged record, byte for byte; each request id once.
	inLog := map[string]*logEntry{}
	for i := range dl.entries {
		e := &dl.entries[i]
		id := e.rec.RequestID
		if id == "" {
			t.Errorf("%s: record %d has no request id", prof, e.rec.Seq)
			continue
		}
		if prev, dup := inLog[id]; dup {
			t.Errorf("%s: request %s committed twice (records %d and %d)", prof, id, prev.rec.Seq, e.rec.Seq)
		}
		inLog[id] = e
	}
	maxAckedWrite := -1
	for id, a := range ackedBy {
		if strings.Join(a.put.keys, "/") != prof {
			continue
		}
		stats.acked++
		e := inLog[id]
		switch {
		case e == nil:
			t.Errorf("%s: acknowledged put %s (record %d, %s %s) is not in the log after the crash", prof, id, a.rec.Seq, a.rec.Mode, a.rec.Version)
		case string(e.line) != a.line:
			t.Errorf("%s: acknowledged put %s is in the log as\n%s\nnot as acknowledged:\n%s", prof, id, e.line, a.line)
		}
		if a.rec.Mode == store.ModeWrite {
			v, _ := store.ParseVersion(a.rec.Version)
			maxAckedWrite = max(maxAckedWrite, v)
		}
	}
	for id := range inLog {
		if _, ok := ackedBy[id]; !ok {
			stats.unacked++ // committed before the cut, acknowledged after it
		}
	}
	if len(dl.entries) == 0 {
		return // nothing committed before the cut
	}
	m, err := readManifest(pdir)
	if err != nil {
		t.Fatalf("%s: manifest after the crash: %v", prof, err)
	}
	switch mw := dl.maxWrite(); {
	case m > mw:
		t.Errorf("%s: the manifest names v%d, the newest write in the log is v%d", prof, m, mw)
	case m < maxAckedWrite:
		t.Errorf("%s: the manifest names v%d, below the acknowledged write v%d", prof, m, maxAckedWrite)
	case m < mw:
		stats.lagging++ // the crash fell between a commit and its manifest move
	}
	// Every version reads exactly the rows of its records.
	latest, versions, err := s.Versions(ctx, keys)
	if err != nil {
		t.Fatalf("%s: versions after the crash: %v", prof, err)
	}
	want := map[string][]plPut{}
	for _, e := range dl.entries {
		p, ok := run.put(e.rec.RequestID)
		if !ok {
			t.Errorf("%s: record %d names request %q, which no writer put", prof, e.rec.Seq, e.rec.RequestID)
			continue
		}
		if e.rec.Rows != int64(p.rows) {
			t.Errorf("%s: record %d (%s) holds %d rows, the put had %d", prof, e.rec.Seq, e.rec.RequestID, e.rec.Rows, p.rows)
		}
		want[e.rec.Version] = append(want[e.rec.Version], p)
	}
	names := map[string]bool{}
	for _, vs := range versions {
		names[vs.Version] = true
	}
	for v := range want {
		if !names[v] {
			t.Errorf("%s: %s holds committed records but is not listed", prof, v)
		}
	}
	for _, vs := range versions {
		n, _ := store.ParseVersion(vs.Version)
		plCheckVersion(t, s, keys, n, want[vs.Version])
	}
	if _, err := plRead(s, keys, store.Latest); err != nil {
		t.Errorf("%s: read latest (v%d) after the crash: %v", prof, latest, err)
	}
}

// plRow is one row as read: every column.
type plRow struct {
	gen, seq, j int64
	part        string
	null        bool
	val         float64
}

func plRead(s *store.Store, keys []string, version int) ([]plRow, error) {
	rdr, err := s.Read(context.Background(), keys, store.ReadOptions{SnapshotOptions: store.SnapshotOptions{Version: version}})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	var out []plRow
	for rdr.Next() {
		rec := rdr.RecordBatch()
		sc := rec.Schema()
		col := func(name string) arrow.Array { return rec.Column(sc.FieldIndices(name)[0]) }
		g, q, j := col("gen").(*array.Int64), col("seq").(*array.Int64), col("j").(*array.Int64)
		p, v := col("part"), col("val").(*array.Float64)
		for i := 0; i < int(rec.NumRows()); i++ {
			r := plRow{gen: g.Value(i), seq: q.Value(i), j: j.Value(i), null: p.IsNull(i), val: v.Value(i)}
			if !r.null {
				// A copy: the string would alias the batch's buffer,
				// which the reader reuses once released.
				r.part = strings.Clone(p.ValueStr(i))
			}
			out = append(out, r)
		}
	}
	return out, rdr.Err()
}

// plCheckVersion reads version n and compares it with the rows of puts,
// the puts its records hold: each row once, every column as put, nothing
// else.
func plCheckVersion(t *testing.T, s *store.Store, keys []string, n int, puts []plPut) {
	t.Helper()
	prof := strings.Join(keys, "/")
	rows, err := plRead(s, keys, n)
	if err != nil {
		t.Errorf("%s: read v%d after the crash: %v", prof, n, err)
		return
	}
	type key struct{ gen, seq, j int64 }
	expect := map[key]bool{}
	for _, p := range puts {
		for j := range p.rows {
			expect[key{p.gen, p.seq, int64(j)}] = true
		}
	}
	seen := map[key]bool{}
	bad := 0
	for _, r := range rows {
		k := key{r.gen, r.seq, r.j}
		wantPart, ok := crashPart(r.seq, r.j)
		switch {
		case seen[k]:
			t.Errorf("%s v%d: row %v read twice", prof, n, k)
			bad++
		case !expect[k]:
			t.Errorf("%s v%d: row %v is visible but no record of the version holds it", prof, n, k)
			bad++
		case ok == r.null || wantPart != r.part || r.val != float64(r.gen)*1e6+float64(r.seq)+float64(r.j)/1e6:
			t.Errorf("%s v%d: row %v reads part %q (null %v) val %v: not as put", prof, n, k, r.part, r.null, r.val)
			bad++
		}
		seen[k] = true
		if bad > 5 {
			t.Fatalf("%s v%d: too many bad rows", prof, n)
		}
	}
	if len(seen) != len(expect) {
		var missing []string
		for k := range expect {
			if !seen[k] && len(missing) < 5 {
				missing = append(missing, fmt.Sprint(k))
			}
		}
		sort.Strings(missing)
		t.Errorf("%s v%d: read %d distinct rows, its records hold %d (missing e.g. %v)", prof, n, len(seen), len(expect), missing)
	}
}
