package store_test

// Multi-process evidence for the commit protocol (docs/architecture.md):
// appender and writer processes (the test binary re-executed, see
// helper_test.go) open one data directory with store.Open and race. Every
// acknowledged row must be read exactly once, in the version its record
// names; the manifest never moves backwards; the commit log on disk is one
// unbroken hash chain holding exactly the acknowledged records, byte for
// byte; and the commit order is linearizable: an append acknowledged after
// a write was acknowledged lands in that write's version or a later one.
//
// Default: 8 appender processes × 100 appends while 2 writer processes
// write 12 versions each (~20 s on 2 cores). QUIVER_STRESS=1: 8 × 200 and
// 2 × 25. -short or QUIVER_STRESS=0: 8 × 30 and 2 × 6 (for the race
// detector). QUIVER_MP_APPENDS overrides the appends per process.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

// mpSchema is the schema of the multi-process test's rows.
var mpSchema = arrow.NewSchema([]arrow.Field{
	{Name: "writer", Type: arrow.PrimitiveTypes.Int64},
	{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
	{Name: "j", Type: arrow.PrimitiveTypes.Int64},
	{Name: "note", Type: arrow.BinaryTypes.String},
}, nil)

// mpBatch builds a reader of one batch of rows (writer, seq, 0..rows-1).
func mpBatch(writer, seq int64, rows int) array.RecordReader {
	bld := array.NewRecordBuilder(memory.DefaultAllocator, mpSchema)
	defer bld.Release()
	for j := 0; j < rows; j++ {
		bld.Field(0).(*array.Int64Builder).Append(writer)
		bld.Field(1).(*array.Int64Builder).Append(seq)
		bld.Field(2).(*array.Int64Builder).Append(int64(j))
		bld.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("w%d-s%d-j%d", writer, seq, j))
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(mpSchema, []arrow.RecordBatch{rec})
	if err != nil {
		panic(err)
	}
	return rdr
}

// mpReadVersion reads a version (-1: latest) and returns its rows' ids.
func mpReadVersion(ctx context.Context, s *store.Store, keys []string, version int) ([][3]int64, error) {
	rdr, err := s.Read(ctx, keys, store.ReadOptions{SnapshotOptions: store.SnapshotOptions{Version: version}, Columns: []string{"writer", "seq", "j"}})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	var out [][3]int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		w := rec.Column(0).(*array.Int64).Int64Values()
		q := rec.Column(1).(*array.Int64).Int64Values()
		j := rec.Column(2).(*array.Int64).Int64Values()
		for i := range w {
			out = append(out, [3]int64{w[i], q[i], j[i]})
		}
	}
	return out, rdr.Err()
}

func TestMultiProcessAppendsAndWrites(t *testing.T) {
	appenders, appends, writers, writes, rows := 8, 100, 2, 12, 3
	switch {
	case stressScale():
		appends, writes = 200, 25
	case smallScale():
		appends, writes = 30, 6
	}
	appends = envInt("QUIVER_MP_APPENDS", appends)
	t.Logf("%d appender processes × %d appends, %d writer processes × %d writes, %d rows per put", appenders, appends, writers, writes, rows)
	start := time.Now()
	dir := t.TempDir()
	keys := []string{"mp", "events"}
	pdir := filepath.Join(dir, "mp", "events")
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := store.Open(dir, store.WithAllocator(mem), store.WithLockTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// v0 exists before the race.
	rdr0 := mpBatch(-1, 0, 1)
	c0, err := s.Put(ctx, keys, rdr0, store.PutOptions{Mode: store.ModeWrite})
	rdr0.Release()
	if err != nil {
		t.Fatal(err)
	}

	// In the background: a watcher asserts the manifest only moves
	// forward; a reader reads the latest version over and over, which must
	// always succeed (no uncommitted file is ever visible, no committed one
	// missing); a sweeper with a realistic age removes nothing from the
	// live writers.
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var manifestPolls, manifestMoves, reads, sweeps atomic.Int64
	bgErr := make(chan error, 16)
	bg.Add(3)
	go func() {
		defer bg.Done()
		last := -1
		for {
			select {
			case <-stop:
				return
			default:
			}
			v, err := readManifest(pdir)
			if err != nil {
				bgErr <- fmt.Errorf("watcher: %w", err)
				return
			}
			if v < last {
				bgErr <- fmt.Errorf("watcher: manifest moved backwards from v%d to v%d", last, v)
				return
			}
			if v > last {
				manifestMoves.Add(1)
			}
			last = v
			manifestPolls.Add(1)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := mpReadVersion(ctx, s, keys, -1); err != nil {
				bgErr <- fmt.Errorf("concurrent reader: %w", err)
				return
			}
			reads.Add(1)
		}
	}()
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			rep, err := maint.Sweep(ctx, s, time.Minute)
			if err != nil {
				bgErr <- fmt.Errorf("concurrent sweep: %w", err)
				return
			}
			if len(rep.Removed) > 0 || len(rep.Skipped) > 0 {
				bgErr <- fmt.Errorf("concurrent sweep removed %v, skipped %+v", rep.Removed, rep.Skipped)
				return
			}
			sweeps.Add(1)
		}
	}()

	var procs []*helperProc
	for w := 0; w < appenders; w++ {
		procs = append(procs, startHelper(t, "append", dir, helperArgs{Keys: keys, Writer: int64(w), N: appends, Rows: rows, LockMS: 30000, WaitGo: true}))
	}
	for w := 0; w < writers; w++ {
		procs = append(procs, startHelper(t, "write", dir, helperArgs{Keys: keys, Writer: int64(1000 + w), N: writes, Rows: rows, LockMS: 30000, WaitGo: true}))
	}
	for _, h := range procs {
		h.waitReady(t, "multi-process")
	}
	spawned := time.Now()
	for _, h := range procs {
		_, _ = io.WriteString(h.stdin, "go\n")
	}
	var acks []helperAck
	for _, h := range procs {
		for a := range h.acks {
			acks = append(acks, a)
		}
		if err := <-h.done; err != nil {
			t.Errorf("helper exited: %v\n%s", err, h.stderr())
		}
	}
	putTime := time.Since(spawned)
	close(stop)
	bg.Wait()
	close(bgErr)
	for err := range bgErr {
		t.Error(err)
	}
	t.Logf("puts took %s; manifest polled %d times (%d moves), latest read %d times, swept %d times concurrently",
		putTime.Round(time.Millisecond), manifestPolls.Load(), manifestMoves.Load(), reads.Load(), sweeps.Load())

	// Every put was acknowledged (nothing here should fail).
	var nAppend, nWrite int
	recOf := map[*helperAck]*store.CommitRecord{}
	var ok []*helperAck
	for i := range acks {
		a := &acks[i]
		if a.Err != "" {
			t.Errorf("writer %d seq %d failed: %s", a.Writer, a.Seq, a.Err)
			continue
		}
		c := a.commit(t)
		recOf[a] = c
		ok = append(ok, a)
		if c.Mode == store.ModeWrite {
			nWrite++
		} else {
			nAppend++
		}
		if (c.Mode == store.ModeWrite) != (a.Writer >= 1000) {
			t.Errorf("writer %d seq %d: a %s put committed as %s (%s)", a.Writer, a.Seq, a.Mode, c.Mode, c.Version)
		}
	}
	if nAppend != appenders*appends || nWrite != writers*writes {
		t.Fatalf("acknowledged %d appends and %d writes, want %d and %d", nAppend, nWrite, appenders*appends, writers*writes)
	}
	verOf := func(c *store.CommitRecord) int {
		v, err := store.ParseVersion(c.Version)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	// Linearizability, by the clock: an append that started after a write
	// was acknowledged lands in that write's version or a later one.
	var linChecked int
	for _, w := range ok {
		cw := recOf[w]
		if cw.Mode != store.ModeWrite {
			continue
		}
		for _, a := range ok {
			ca := recOf[a]
			if ca.Mode == store.ModeAppend && a.Start.After(w.End) {
				linChecked++
				if verOf(ca) < verOf(cw) {
					t.Errorf("append w%d/s%d started %s after write w%d/s%d (%s) was acknowledged, but landed in %s",
						a.Writer, a.Seq, a.Start.Sub(w.End), w.Writer, w.Seq, cw.Version, ca.Version)
				}
			}
		}
	}

	// The log on disk: one unbroken chain holding exactly the acknowledged
	// records (and v0's), each byte for byte as acknowledged.
	dl := readDiskLog(t, pdir)
	for _, p := range dl.problems {
		t.Errorf("commit log: %s", p)
	}
	if len(dl.temps) > 0 {
		t.Errorf("commit log: temps left %v", dl.temps)
	}
	if n := len(dl.entries); n != len(ok)+1 {
		t.Errorf("the log holds %d records, want %d (the acknowledged ones and v0's)", n, len(ok)+1)
	} else if dl.head.Seq != dl.entries[n-1].rec.Seq {
		t.Errorf("HEAD names record %d, the last is %d", dl.head.Seq, dl.entries[n-1].rec.Seq)
	}
	if e := dl.bySeq(c0.Seq); e == nil || string(e.line) != string(c0.Line()) {
		t.Errorf("v0's record is not in the log as acknowledged")
	}
	for _, a := range ok {
		c := recOf[a]
		e := dl.bySeq(c.Seq)
		if e == nil || string(e.line) != a.Line {
			t.Errorf("writer %d seq %d: acknowledged record %d is not in the log as acknowledged", a.Writer, a.Seq, c.Seq)
		}
	}
	// Linearizability, by the log: every append after a write record lands
	// in that write's version or a later one.
	maxW := -1
	for _, e := range dl.entries {
		v := verOf(e.rec)
		switch e.rec.Mode {
		case store.ModeWrite:
			maxW = max(maxW, v)
		case store.ModeAppend:
			if v < maxW {
				t.Errorf("log record %d: append to %s after a write of v%d was committed", e.rec.Seq, e.rec.Version, maxW)
			}
		}
	}

	// Each write its own version, index 0; (version, index) unique.
	writeVersions := map[string]bool{c0.Version: true}
	type vi struct {
		v string
		i int
	}
	seenIdx := map[vi]bool{{c0.Version, 0}: true}
	for _, a := range ok {
		c := recOf[a]
		if c.Mode == store.ModeWrite {
			if writeVersions[c.Version] {
				t.Errorf("two writes committed %s", c.Version)
			}
			writeVersions[c.Version] = true
			if c.Index != 0 {
				t.Errorf("write w%d/s%d has index %d", a.Writer, a.Seq, c.Index)
			}
		}
		k := vi{c.Version, c.Index}
		if seenIdx[k] {
			t.Errorf("index %d of %s acknowledged twice", k.i, k.v)
		}
		seenIdx[k] = true
	}

	// The versions on disk are exactly v0 and the writes' versions; the
	// manifest names the newest.
	latest, err := readManifest(pdir)
	if err != nil {
		t.Fatal(err)
	}
	onDisk := versionDirs(t, pdir)
	if len(onDisk) != len(writeVersions) {
		t.Errorf("versions on disk %v, want one per write (%d)", onDisk, len(writeVersions))
	}
	for _, v := range onDisk {
		if !writeVersions[store.VersionName(v)] {
			t.Errorf("version v%d on disk was not made by any acknowledged write", v)
		}
	}
	if want := onDisk[len(onDisk)-1]; latest != want {
		t.Errorf("manifest names v%d, newest version is v%d", latest, want)
	}

	// On disk, per version: the data files are exactly those the records
	// list (a re-targeted append left nothing behind), each hashing to its
	// record; every appended index has its claim; no temp is left.
	recorded := map[string]string{} // path relative to the profile → sha256
	claims := map[string]bool{}
	for _, e := range dl.entries {
		for _, f := range e.rec.Files {
			recorded[f.Path] = f.SHA256
		}
		if e.rec.Mode == store.ModeAppend {
			claims[fmt.Sprintf("%s/.%d.parquet.claim", e.rec.Version, e.rec.Index)] = true
		}
	}
	dataRe := regexp.MustCompile(`^v\d+/\d+\.parquet$`)
	claimRe := regexp.MustCompile(`^v\d+/\.\d+\.parquet\.claim$`)
	onDiskFiles := 0
	err = filepath.WalkDir(pdir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(pdir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case strings.HasPrefix(rel, ".log/") || rel == "manifest.json" || rel == ".quiver.kind" || strings.HasSuffix(rel, "/.version.json"):
		case dataRe.MatchString(rel):
			onDiskFiles++
			sum, ok := recorded[rel]
			if !ok {
				t.Errorf("%s: a data file no record lists", rel)
			} else if got := fileSHA256(t, p); got != sum {
				t.Errorf("%s: sha256 %s, its record says %s (overwritten?)", rel, got, sum)
			}
		case claimRe.MatchString(rel):
			delete(claims, rel)
		default:
			t.Errorf("%s: unexpected file (a leftover temp?)", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if onDiskFiles != len(recorded) {
		t.Errorf("%d data files on disk, the records list %d", onDiskFiles, len(recorded))
	}
	for c := range claims {
		t.Errorf("appended index without its claim: %s", c)
	}

	// Rows across all versions: every acknowledged row exactly once, in the
	// version its record names, and nothing else.
	want := map[[3]int64]string{{-1, 0, 0}: c0.Version}
	for _, a := range ok {
		for j := 0; j < a.Rows; j++ {
			want[[3]int64{a.Writer, a.Seq, int64(j)}] = recOf[a].Version
		}
	}
	got := map[[3]int64]int{}
	for _, v := range onDisk {
		rowsOf, err := mpReadVersion(ctx, s, keys, v)
		if err != nil {
			t.Fatalf("read v%d: %v", v, err)
		}
		for _, r := range rowsOf {
			got[r]++
			if w, ok := want[r]; !ok {
				t.Errorf("row %v in v%d was never acknowledged", r, v)
			} else if w != store.VersionName(v) {
				t.Errorf("row %v acknowledged in %s, found in v%d", r, w, v)
			}
		}
	}
	for r := range want {
		if got[r] != 1 {
			t.Errorf("acknowledged row %v read %d times", r, got[r])
		}
	}

	// And the auditor agrees.
	rep, err := maint.Verify(ctx, s, maint.VerifyOptions{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.CheckedFiles != len(recorded) {
		t.Errorf("verify: ok=%v checked %d of %d files: %+v", rep.OK, rep.CheckedFiles, len(recorded), rep.Problems)
	}
	if t.Failed() {
		return
	}
	t.Logf("verified %d rows in %d versions, %d log records, %d files hashed, %d append/write pairs ordered by the clock; total %s",
		len(want), len(onDisk), len(dl.entries), len(recorded), linChecked, time.Since(start).Round(time.Millisecond))
}

// TestConcurrentSnapshotsDuringAppends: a reader taking snapshots while
// appends commit never sees a half-made commit (a segment is created whole
// or not at all).
func TestConcurrentSnapshotsDuringAppends(t *testing.T) {
	dir := t.TempDir()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := store.Open(dir, store.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	// A second store on the same directory reads the log incrementally,
	// as another server would.
	r2, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"race"}
	r := mpBatch(0, 0, 1)
	_, err = s.Put(context.Background(), keys, r, store.PutOptions{Mode: store.ModeWrite})
	r.Release()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failures atomic.Int64
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for _, rs := range []*store.Store{s, r2} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			last := int64(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				sn, err := rs.Snapshot(context.Background(), keys, store.SnapshotOptions{Version: -1})
				if err != nil {
					if failures.Add(1) == 1 {
						t.Errorf("snapshot during appends: %v", err)
					}
					continue
				}
				if sn.Rows() < last {
					t.Errorf("snapshot went back from %d to %d rows", last, sn.Rows())
				}
				last = sn.Rows()
			}
		}()
	}
	for w := int64(1); w <= 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := int64(0); seq < 25; seq++ {
				r := mpBatch(w, seq, 1)
				_, err := s.Put(context.Background(), keys, r, store.PutOptions{})
				r.Release()
				if err != nil && failures.Add(1) == 1 {
					t.Errorf("append: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d operations failed", n)
	}
	for _, rs := range []*store.Store{s, r2} {
		sn, err := rs.Snapshot(context.Background(), keys, store.SnapshotOptions{Version: -1})
		if err != nil || sn.Rows() != 101 {
			t.Fatalf("final snapshot: %v rows, %v", sn.Rows(), err)
		}
	}
}
