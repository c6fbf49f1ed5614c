package store_test

// Crash evidence for the commit protocol (docs/architecture.md, "What
// survives a crash"): a writer process (appends, writes and partitioned
// writes in a loop, each with a request id) is killed with SIGKILL at
// random moments, over and over, on one data directory. After every kill:
//
//   - the commit log on disk is one unbroken hash chain holding every
//     acknowledged record byte for byte; the manifest never moved back and
//     is never ahead of the log;
//   - a lock the killed writer held names a dead owner and is taken over
//     by the next writer at once (or broken by BreakLock), never waited
//     for;
//   - the put that was in flight, retried with its request id, commits
//     exactly once (replayed if it had committed, written if not);
//   - the latest version reads exactly the rows its records list: nothing
//     partial, nothing uncommitted, every acknowledged commit whole.
//
// At the end Verify finds nothing mutated, missing or broken, and after
// Sweep(0) nothing at all.
//
// QUIVER_CRASH_KILLS=N sets the number of kills (default 30; QUIVER_STRESS=1
// makes it 120, -short or QUIVER_STRESS=0 8). QUIVER_CRASH_SEED fixes the
// random choices (kill delays, put mix); QUIVER_CRASH_DIR keeps the data
// directory for inspection.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

var crashSchema = arrow.NewSchema([]arrow.Field{
	{Name: "gen", Type: arrow.PrimitiveTypes.Int64},
	{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
	{Name: "j", Type: arrow.PrimitiveTypes.Int64},
	{Name: "part", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "val", Type: arrow.PrimitiveTypes.Float64},
}, nil)

// crashPart is the partition value of row j of put seq: three values and
// sometimes null (the hive default partition).
func crashPart(seq, j int64) (string, bool) {
	if (seq+j)%11 == 0 {
		return "", false
	}
	return []string{"a", "b", "c"}[(seq+j)%3], true
}

// crashBatches builds rows rows of put (gen, seq) in batches of at most
// 4096.
func crashBatches(gen, seq int64, rows int) array.RecordReader {
	var recs []arrow.RecordBatch
	bld := array.NewRecordBuilder(memory.DefaultAllocator, crashSchema)
	defer bld.Release()
	for j := 0; j < rows; j++ {
		bld.Field(0).(*array.Int64Builder).Append(gen)
		bld.Field(1).(*array.Int64Builder).Append(seq)
		bld.Field(2).(*array.Int64Builder).Append(int64(j))
		if v, ok := crashPart(seq, int64(j)); ok {
			bld.Field(3).(*array.StringBuilder).Append(v)
		} else {
			bld.Field(3).(*array.StringBuilder).AppendNull()
		}
		bld.Field(4).(*array.Float64Builder).Append(float64(gen)*1e6 + float64(seq) + float64(j)/1e6)
		if (j+1)%4096 == 0 || j == rows-1 {
			recs = append(recs, bld.NewRecordBatch())
		}
	}
	rdr, err := array.NewRecordReader(crashSchema, recs)
	if err != nil {
		panic(err)
	}
	for _, r := range recs {
		r.Release()
	}
	return rdr
}

func crashRequestID(gen, seq int64) string { return fmt.Sprintf("crash-g%d-s%d", gen, seq) }

// crashOptions are the put options of an announced put.
func crashOptions(a helperAck) store.PutOptions {
	o := store.PutOptions{Mode: store.Mode(a.Mode), RequestID: crashRequestID(a.Writer, a.Seq)}
	if a.Part {
		o.PartitionBy = []string{"part"}
	}
	return o
}

// helperCrashLoop announces, does and acknowledges puts until it is
// killed.
func helperCrashLoop(dir string, a helperArgs) error {
	s, err := store.Open(dir, store.WithLockTimeout(time.Duration(a.LockMS)*time.Millisecond),
		store.WithWriter(fmt.Sprintf("crash-gen-%d", a.Writer)))
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(a.Seed), uint64(a.Writer)))
	helperPrint(helperAck{Writer: a.Writer, Ready: true})
	for seq := int64(0); a.N == 0 || seq < int64(a.N); seq++ {
		ann := helperAck{Writer: a.Writer, Seq: seq, Rows: 1 + rng.IntN(200), Mode: string(store.ModeAppend), Begin: true}
		if rng.IntN(5) == 0 {
			ann.Rows = 20000 + rng.IntN(30000) // long enough to be killed mid-stream
		}
		switch x := rng.IntN(10); {
		case x < 6:
		case x < 8:
			ann.Mode = string(store.ModeWrite)
		default:
			ann.Mode, ann.Part = string(store.ModeWrite), true
		}
		helperPrint(ann)
		rdr := crashBatches(a.Writer, seq, ann.Rows)
		c, err := s.Put(context.Background(), a.Keys, rdr, crashOptions(ann))
		rdr.Release()
		ack := ann
		ack.Begin = false
		if err != nil {
			ack.Err = err.Error()
		} else {
			ack.Line = string(c.Line())
		}
		helperPrint(ack)
	}
	return nil
}

// crashAck is an acknowledged commit and the rows it carried.
type crashAck struct {
	gen, seq int64
	rows     int
	line     string
	rec      *store.CommitRecord
}

type crashStats struct {
	commits, emptyRounds, staleLocks, takenOver, broken, retried, replayed, lagging, probes int
	// distinct paths seen after kills
	orphans, temps map[string]bool
}

// syncBuf is a goroutine-safe log sink.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestCrashKilledWriter(t *testing.T) {
	kills := 30
	switch {
	case stressScale():
		kills = 120
	case smallScale():
		kills = 8
	}
	kills = envInt("QUIVER_CRASH_KILLS", kills)
	seed := int64(envInt("QUIVER_CRASH_SEED", int(time.Now().UnixNano()%1e9)))
	t.Logf("%d kills, seed %d (QUIVER_CRASH_SEED to repeat)", kills, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	const helperLock = 2 * time.Second
	const parentLock = 30 * time.Second

	start := time.Now()
	dir := t.TempDir()
	if keep := os.Getenv("QUIVER_CRASH_DIR"); keep != "" {
		dir = keep // kept for inspection; must be empty or absent
	}
	keys := []string{"crash", "log"}
	pdir := filepath.Join(dir, "crash", "log")
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var logs syncBuf
	s, err := store.Open(dir, store.WithAllocator(mem), store.WithLockTimeout(parentLock), store.WithLogger(zerolog.New(&logs)))
	if err != nil {
		t.Fatal(err)
	}
	r0 := crashBatches(-1, 0, 10)
	c0, err := s.Put(ctx, keys, r0, store.PutOptions{Mode: store.ModeWrite})
	r0.Release()
	if err != nil {
		t.Fatal(err)
	}
	acked := []crashAck{{gen: -1, seq: 0, rows: 10, line: string(c0.Line()), rec: c0}}
	st := crashStats{orphans: map[string]bool{}, temps: map[string]bool{}}

	// Two certain stale locks: a process killed while holding the lock.
	// The first is taken over by the next writer, the second broken by
	// BreakLock.
	for i := range 2 {
		h := startHelper(t, "lockhold", dir, helperArgs{Keys: keys, Writer: -3})
		h.waitReady(t, "lockhold")
		_ = h.cmd.Process.Kill()
		for range h.acks {
		}
		<-h.done
		if _, err := os.Stat(filepath.Join(pdir, "manifest.json.write_lock")); err != nil {
			t.Fatalf("the killed holder left no lock: %v", err)
		}
		in, err := s.Inspect(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		if in.Lock == nil || !in.Lock.Stale || !strings.Contains(in.Lock.Reason, "gone") {
			t.Fatalf("the lock of a killed holder is not judged stale: %+v", in.Lock)
		}
		if i == 0 {
			acked = append(acked, crashProbe(t, s, keys, &st))
			st.takenOver++
			if !strings.Contains(logs.String(), "stale manifest lock taken over") {
				t.Errorf("the takeover was not logged: %s", logs.String())
			}
		} else {
			crashBreakLock(t, s, keys, &st)
		}
	}

	lastManifest := 0
	for round := 0; round < kills; round++ {
		gen := int64(round)
		h := startHelper(t, "crash", dir, helperArgs{Keys: keys, Writer: gen, Seed: seed, LockMS: int(helperLock / time.Millisecond)})
		h.waitReady(t, fmt.Sprintf("round %d", round))
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		_ = h.cmd.Process.Signal(syscall.SIGKILL)
		var inFlight *helperAck
		n := 0
		for a := range h.acks {
			switch {
			case a.Begin:
				inFlight = &a
			case a.Err != "":
				t.Errorf("round %d: put %d failed: %s", round, a.Seq, a.Err)
				inFlight = nil
			default:
				acked = append(acked, crashAck{gen: a.Writer, seq: a.Seq, rows: a.Rows, line: a.Line, rec: a.commit(t)})
				inFlight = nil
				n++
			}
		}
		werr := <-h.done
		var ee *exec.ExitError
		if !errors.As(werr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: helper was not killed by SIGKILL: %v\n%s", round, werr, h.stderr())
		}
		st.commits += n
		if n == 0 {
			st.emptyRounds++
		}
		lastManifest = crashCheckLog(t, pdir, acked, lastManifest, &st)
		crashStaleLock(t, s, keys, pdir, round, &st, &acked)
		if inFlight != nil {
			acked = append(acked, crashRetry(t, s, keys, *inFlight, &st))
		}
		crashCheckLatest(t, s, keys, pdir, acked, &st)
		if round%10 == 9 || round == kills-1 {
			crashCheckAll(t, s, keys, pdir, acked)
		}
		if t.Failed() {
			t.Fatalf("stopped after round %d (seed %d); data dir %s (QUIVER_CRASH_DIR keeps it)", round, seed, dir)
		}
	}
	// The next commit leaves the manifest on the newest written version.
	acked = append(acked, crashProbe(t, s, keys, &st))
	dl := readDiskLog(t, pdir)
	if m, err := readManifest(pdir); err != nil || m != dl.maxWrite() {
		t.Errorf("after the last commit the manifest names v%d (%v), the newest write is v%d", m, err, dl.maxWrite())
	}
	crashCheckAll(t, s, keys, pdir, acked)
	crashVerifySweep(t, s, keys)
	t.Logf("%d kills in %s: %d commits acknowledged (%d rounds without one); %d puts in flight retried by request id (%d had committed); "+
		"%d locks left by killed writers; dead owners' locks taken over by the next writer %d times, broken by BreakLock %d times (2 deliberate kills included); manifest behind the log %d times; "+
		"seen after kills: %d uncommitted data files, %d temp files",
		kills, time.Since(start).Round(time.Millisecond), st.commits, st.emptyRounds, st.retried, st.replayed,
		st.staleLocks, st.takenOver, st.broken, st.lagging, len(st.orphans), len(st.temps))
}

// crashProbe appends one row as the next writer; it must get in at once,
// whatever lock a killed process left (a dead owner's lock is taken over,
// not waited for).
func crashProbe(t *testing.T, s *store.Store, keys []string, st *crashStats) crashAck {
	t.Helper()
	seq := int64(st.probes + 1000)
	rdr := crashBatches(-2, seq, 1)
	t0 := time.Now()
	c, err := s.Put(context.Background(), keys, rdr, store.PutOptions{})
	rdr.Release()
	if err != nil {
		t.Fatalf("probe append: %v", err)
	}
	if waited := time.Since(t0); waited > 5*time.Second {
		t.Errorf("the next writer waited %s for a dead owner's lock", waited)
	}
	st.probes++
	return crashAck{gen: -2, seq: seq, rows: 1, line: string(c.Line()), rec: c}
}

// crashBreakLock breaks a dead owner's lock with Store.BreakLock.
func crashBreakLock(t *testing.T, s *store.Store, keys []string, st *crashStats) {
	t.Helper()
	res, err := s.BreakLock(context.Background(), keys)
	if err != nil {
		t.Fatalf("BreakLock: %v", err)
	}
	if !res.Broken || !strings.Contains(res.Reason, "gone") {
		t.Fatalf("BreakLock did not break the lock of a killed process: %+v", res)
	}
	st.broken++
}

// crashStaleLock handles a manifest lock the killed writer left: it must
// be judged stale (its owner is gone); every other one is taken over by
// the next writer, the others broken by BreakLock.
func crashStaleLock(t *testing.T, s *store.Store, keys []string, pdir string, round int, st *crashStats, acked *[]crashAck) {
	t.Helper()
	lock := filepath.Join(pdir, "manifest.json.write_lock")
	raw, err := os.ReadFile(lock)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	st.staleLocks++
	in, err := s.Inspect(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if in.Lock == nil || !in.Lock.Stale {
		t.Fatalf("round %d: the lock of the killed writer (%s) is not judged stale: %+v", round, raw, in.Lock)
	}
	if st.staleLocks%2 == 1 {
		*acked = append(*acked, crashProbe(t, s, keys, st))
		st.takenOver++
	} else {
		crashBreakLock(t, s, keys, st)
	}
	if b, err := os.ReadFile(lock); err == nil {
		t.Fatalf("round %d: a lock is still there after the stale one was handled: %s", round, b)
	}
}

// crashRetry retries the put that was in flight when the writer was
// killed, with its request id: it must answer the earlier commit if there
// was one (Replayed) and otherwise commit now, once.
func crashRetry(t *testing.T, s *store.Store, keys []string, a helperAck, st *crashStats) crashAck {
	t.Helper()
	rdr := crashBatches(a.Writer, a.Seq, a.Rows)
	c, err := s.Put(context.Background(), keys, rdr, crashOptions(a))
	rdr.Release()
	if err != nil {
		t.Fatalf("retry of gen %d seq %d (%s, %d rows): %v", a.Writer, a.Seq, a.Mode, a.Rows, err)
	}
	st.retried++
	if c.Replayed {
		st.replayed++
	}
	if c.RequestID != crashRequestID(a.Writer, a.Seq) {
		t.Errorf("retry answered with the record of request %q", c.RequestID)
	}
	return crashAck{gen: a.Writer, seq: a.Seq, rows: a.Rows, line: string(c.Line()), rec: c}
}

// crashCheckLog reads the log from disk: an unbroken chain holding every
// acknowledged record byte for byte, each request id once; the manifest
// never behind where it was and never ahead of the newest write.
func crashCheckLog(t *testing.T, pdir string, acked []crashAck, lastManifest int, st *crashStats) int {
	t.Helper()
	dl := readDiskLog(t, pdir)
	for _, p := range dl.problems {
		t.Errorf("commit log after kill: %s", p)
	}
	for _, tmp := range dl.temps {
		st.temps[".log/"+tmp] = true
	}
	for _, a := range acked {
		e := dl.bySeq(a.rec.Seq)
		if e == nil || string(e.line) != a.line {
			t.Errorf("acknowledged record %d (gen %d seq %d) is not in the log as acknowledged", a.rec.Seq, a.gen, a.seq)
		}
	}
	ids := map[string]int64{}
	for _, e := range dl.entries {
		if id := e.rec.RequestID; id != "" {
			if prev, dup := ids[id]; dup {
				t.Errorf("request %s committed twice (records %d and %d)", id, prev, e.rec.Seq)
			}
			ids[id] = e.rec.Seq
		}
	}
	m, err := readManifest(pdir)
	if err != nil {
		t.Fatalf("manifest after kill: %v", err)
	}
	if m < lastManifest {
		t.Errorf("manifest moved back from v%d to v%d", lastManifest, m)
	}
	switch mw := dl.maxWrite(); {
	case m > mw:
		t.Errorf("manifest names v%d, but the newest write in the log is v%d", m, mw)
	case m < mw:
		st.lagging++ // killed between the commit and the manifest move
	}
	return m
}

// crashCheckLatest reads the latest version: it must hold exactly the files
// its records list (an uncommitted file is invisible, at the root as under
// partitions), read exactly their rows, and hold every acknowledged commit
// of that version whole.
func crashCheckLatest(t *testing.T, s *store.Store, keys []string, pdir string, acked []crashAck, st *crashStats) {
	t.Helper()
	latest, err := readManifest(pdir)
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	vname := store.VersionName(latest)
	dl := readDiskLog(t, pdir)
	recorded := map[string]bool{}
	var rows int64
	for _, e := range dl.entries {
		if e.rec.Version != vname {
			continue
		}
		for _, f := range e.rec.Files {
			recorded[f.Path] = true
			rows += f.Rows
		}
	}
	_ = filepath.WalkDir(filepath.Join(pdir, vname), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(pdir, p)
		rel = filepath.ToSlash(rel)
		switch name := d.Name(); {
		case strings.HasSuffix(name, ".tmp"):
			st.temps[rel] = true
		case strings.HasSuffix(name, ".parquet") && !strings.HasPrefix(name, ".") && !recorded[rel]:
			st.orphans[rel] = true
		}
		return nil
	})
	sn, err := s.Snapshot(context.Background(), keys, store.SnapshotOptions{Version: -1})
	if err != nil {
		t.Fatalf("snapshot of latest after kill: %v", err)
	}
	if sn.Version != latest {
		t.Errorf("snapshot of latest is v%d, the manifest names %s", sn.Version, vname)
	}
	for _, f := range sn.Files {
		if !recorded[f.Path] {
			t.Errorf("%s is visible but no commit record lists it", f.Path)
		}
	}
	if len(sn.Files) != len(recorded) {
		t.Errorf("%s: %d files visible, its records list %d", vname, len(sn.Files), len(recorded))
	}
	got, err := crashRead(s, keys, latest)
	if err != nil {
		t.Fatalf("read latest (%s) after kill: %v", vname, err)
	}
	if int64(len(got)) != rows {
		t.Errorf("%s: read %d rows, its commit records hold %d", vname, len(got), rows)
	}
	crashCheckAcked(t, vname, got, acked)
}

type crashRow struct {
	gen, seq, j int64
	part        string
	null        bool
}

func crashRead(s *store.Store, keys []string, version int) ([]crashRow, error) {
	rdr, err := s.Read(context.Background(), keys, store.ReadOptions{SnapshotOptions: store.SnapshotOptions{Version: version}})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	var out []crashRow
	for rdr.Next() {
		rec := rdr.RecordBatch()
		sc := rec.Schema()
		col := func(name string) arrow.Array { return rec.Column(sc.FieldIndices(name)[0]) }
		g := col("gen").(*array.Int64)
		q := col("seq").(*array.Int64)
		j := col("j").(*array.Int64)
		p := col("part")
		for i := 0; i < int(rec.NumRows()); i++ {
			r := crashRow{gen: g.Value(i), seq: q.Value(i), j: j.Value(i), null: p.IsNull(i)}
			if !r.null {
				r.part = strings.Clone(p.ValueStr(i)) // it may alias the batch, released at the next Next
			}
			out = append(out, r)
		}
	}
	return out, rdr.Err()
}

// crashCheckAcked checks that rows hold every acknowledged commit of vname
// exactly once and whole, with the right partition values, and no row
// twice.
func crashCheckAcked(t *testing.T, vname string, rows []crashRow, acked []crashAck) {
	t.Helper()
	seen := map[[3]int64]int{}
	for _, r := range rows {
		k := [3]int64{r.gen, r.seq, r.j}
		seen[k]++
		if seen[k] == 2 {
			t.Errorf("%s: row %v read twice", vname, k)
		}
		if r.gen < 0 {
			continue
		}
		if v, ok := crashPart(r.seq, r.j); ok == r.null || v != r.part {
			t.Errorf("%s: row %v has part %q (null %v), want %q", vname, k, r.part, r.null, v)
		}
	}
	for _, a := range acked {
		if a.rec.Version != vname {
			continue
		}
		for j := 0; j < a.rows; j++ {
			if seen[[3]int64{a.gen, a.seq, int64(j)}] != 1 {
				t.Errorf("%s: acknowledged commit gen %d seq %d (record %d) lacks row %d", vname, a.gen, a.seq, a.rec.Seq, j)
				break
			}
		}
	}
}

// crashCheckAll re-reads every version holding an acknowledged commit and
// re-hashes every acknowledged file against its record.
func crashCheckAll(t *testing.T, s *store.Store, keys []string, pdir string, acked []crashAck) {
	t.Helper()
	versions := map[string]bool{}
	for _, a := range acked {
		versions[a.rec.Version] = true
		for _, f := range a.rec.Files {
			if sum := fileSHA256(t, filepath.Join(pdir, filepath.FromSlash(f.Path))); sum != f.SHA256 {
				t.Errorf("%s changed: sha256 %s, record %s", f.Path, sum, f.SHA256)
			}
		}
	}
	for v := range versions {
		n, _ := store.ParseVersion(v)
		rows, err := crashRead(s, keys, n)
		if err != nil {
			t.Errorf("read %s: %v", v, err)
			continue
		}
		crashCheckAcked(t, v, rows, acked)
	}
}

// crashVerifySweep runs Verify and Sweep(0): no committed file may be
// mutated or missing and the chain must be intact; what killed writers
// left (orphans, temps, abandoned versions) is all Sweep(0) may find, and
// after it Verify finds nothing and everything still reads.
func crashVerifySweep(t *testing.T, s *store.Store, keys []string) {
	t.Helper()
	ctx := context.Background()
	run := func() map[string][]string {
		rep, err := maint.Verify(ctx, s, maint.VerifyOptions{Keys: keys, StaleAfter: time.Nanosecond})
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		kinds := map[string][]string{}
		for _, p := range rep.Problems {
			kinds[p.Kind] = append(kinds[p.Kind], p.Path+" ("+p.Detail+")")
		}
		return kinds
	}
	before := run()
	for k, v := range before {
		if k != maint.ProblemOrphan && k != maint.ProblemStaleTemp {
			t.Errorf("verify after crashes: %s %v", k, v)
		}
	}
	rep, err := maint.Sweep(ctx, s, 0)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if len(rep.Skipped) > 0 {
		t.Errorf("sweep skipped %+v", rep.Skipped)
	}
	after := run()
	for k, v := range after {
		t.Errorf("verify after Sweep(0): %s %v", k, v)
	}
	counts := func(m map[string][]string) string {
		var parts []string
		for k, v := range m {
			parts = append(parts, fmt.Sprintf("%s=%d", k, len(v)))
		}
		sort.Strings(parts)
		return strings.Join(parts, " ")
	}
	t.Logf("verify before sweep: [%s]; Sweep(0) removed %d entries", counts(before), len(rep.Removed))
	if _, err := crashRead(s, keys, -1); err != nil {
		t.Errorf("read latest after sweep: %v", err)
	}
}
