package maint_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/maint"
)

// firstPutKeys is the profile the killed first puts of these tests were
// creating: fresh/profile, below a directory that is no profile either.
var firstPutKeys = []string{"fresh", "profile"}

// killedWhileStreaming lays out what a partitioned write creating
// fresh/profile leaves when killed while it streams, aged age: its
// version's .version.json (its creator gone) and a hidden temp per
// partition file being encoded.
func killedWhileStreaming(t *testing.T, s *store.Store, dir string, age time.Duration) {
	t.Helper()
	scratch := []string{"scratch", "s"}
	put(t, s, store.ModeWrite, scratch, fromJSON(t, regionSchema, `[{"id":1,"region":"eu"}]`), store.PutOptions{PartitionBy: []string{"region"}})
	info := versionInfoAt(t, filepath.Join(dir, "scratch", "s", "v0", ".version.json"), time.Now().Add(-age))
	if err := os.RemoveAll(filepath.Join(dir, "scratch")); err != nil {
		t.Fatal(err)
	}
	prof := filepath.Join(dir, "fresh", "profile")
	writeFile(t, filepath.Join(prof, "v0", ".version.json"), info, age)
	writeFile(t, filepath.Join(prof, "v0", "region=eu", ".0123456789abcdef0123456789abcdef.0.parquet.tmp"), "PAR1 half a row group", age)
	writeFile(t, filepath.Join(prof, "v0", "region=us", ".fedcba9876543210fedcba9876543210.0.parquet.tmp"), "PAR1", age)
	for _, d := range []string{"v0/region=eu", "v0/region=us", "v0"} {
		touchOld(t, filepath.Join(prof, filepath.FromSlash(d)), age)
	}
}

// killedDuringCommit lays out what the same write leaves when killed in
// its commit, before its record: its version with its partition files
// staged, its lock (its owner gone), the profile and parent markers and
// the schema policy its commit made, and the temp of its log segment.
func killedDuringCommit(t *testing.T, s *store.Store, dir string, age time.Duration) {
	t.Helper()
	uncommittedVersion(t, s, dir, firstPutKeys, 0, func(scratch []string) {
		put(t, s, store.ModeWrite, scratch, fromJSON(t, regionSchema, `[{"id":1,"region":"eu"},{"id":2,"region":"us"}]`), store.PutOptions{PartitionBy: []string{"region"}})
	})
	prof := filepath.Join(dir, "fresh", "profile")
	vi := filepath.Join(prof, "v0", ".version.json")
	writeFile(t, vi, versionInfoAt(t, vi, time.Now().Add(-age)), age)
	host, _ := os.Hostname()
	lock, _ := json.Marshal(store.Owner{Host: host, PID: deadPID(t), Time: time.Now().Add(-age)})
	writeFile(t, filepath.Join(prof, "manifest.json.write_lock"), string(lock), age)
	writeFile(t, filepath.Join(dir, "fresh", ".quiver.kind"), "parent\n", age)
	writeFile(t, filepath.Join(prof, ".quiver.kind"), "profile\n", age)
	writeFile(t, filepath.Join(prof, ".quiver.policy.json"), `{"schema_policy":"additive","set":"2026-01-01T00:00:00Z","writer":"killed"}`, age)
	writeFile(t, filepath.Join(prof, ".log", ".00000000000000000001.ndjson.0123abcd.tmp"), `{"seq":1`, age)
	err := filepath.WalkDir(prof, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			touchOld(t, p, age)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSweepNeverCommittedProfile (red team round 25's z01): what a put
// killed while it created its profile leaves — no manifest, no commit
// record — is reported by verify and removed by sweep as a killed write's
// version of an existing profile is, by the same age rules; a young one
// (a writer elsewhere still at work) is left alone; and what sweep cannot
// tell from a profile that lost its records is left alone too.
func TestSweepNeverCommittedProfile(t *testing.T) {
	const old = 2 * time.Hour
	cases := []struct {
		name   string
		make   func(t *testing.T, s *store.Store, dir string)
		verify []string // "kind path", sorted (stale after 1 h)
		swept  []string // by Sweep(1 h), sorted
		left   []string // what stays of fresh/, as tree lists it
		// skipped by the sweep ("kind path")
		skipped []string
		// reusable: a first put of the profile commits afterwards
		reusable bool
	}{
		{
			name: "killed while streaming",
			make: func(t *testing.T, s *store.Store, dir string) { killedWhileStreaming(t, s, dir, old) },
			verify: []string{
				"orphan fresh/profile/v0",
				"stale_temp fresh/profile/v0/region=eu/.0123456789abcdef0123456789abcdef.0.parquet.tmp",
				"stale_temp fresh/profile/v0/region=us/.fedcba9876543210fedcba9876543210.0.parquet.tmp",
			},
			swept:    []string{"fresh", "fresh/profile", "fresh/profile/v0"},
			reusable: true,
		},
		{
			name: "killed during its commit",
			make: func(t *testing.T, s *store.Store, dir string) { killedDuringCommit(t, s, dir, old) },
			verify: []string{
				"orphan fresh/profile/v0",
				"stale_lock fresh/profile/manifest.json.write_lock",
				"stale_temp fresh/profile/.log/.00000000000000000001.ndjson.0123abcd.tmp",
			},
			swept: []string{
				"fresh/profile", "fresh/profile/.log", "fresh/profile/.log/.00000000000000000001.ndjson.0123abcd.tmp",
				"fresh/profile/.quiver.kind", "fresh/profile/.quiver.policy.json", "fresh/profile/v0",
			},
			left:     []string{"fresh", "fresh/.quiver.kind"}, // the parent's marker stays
			reusable: true,
		},
		{
			name: "killed between reserving its version and its .version.json",
			make: func(t *testing.T, s *store.Store, dir string) {
				v0 := filepath.Join(dir, "fresh", "profile", "v0")
				if err := os.MkdirAll(v0, 0o755); err != nil {
					t.Fatal(err)
				}
				touchOld(t, v0, old)
			},
			verify:   []string{"orphan fresh/profile/v0"},
			swept:    []string{"fresh", "fresh/profile", "fresh/profile/v0"},
			reusable: true,
		},
		{
			name: "a failed first commit's marker",
			make: func(t *testing.T, s *store.Store, dir string) {
				writeFile(t, filepath.Join(dir, "fresh", ".quiver.kind"), "parent\n", 0)
				writeFile(t, filepath.Join(dir, "fresh", "profile", ".quiver.kind"), "profile\n", 0)
			},
			swept:    []string{"fresh/profile", "fresh/profile/.quiver.kind"},
			left:     []string{"fresh", "fresh/.quiver.kind"},
			reusable: true,
		},
		{
			name: "young: a writer elsewhere at work",
			make: func(t *testing.T, s *store.Store, dir string) { killedWhileStreaming(t, s, dir, 0) },
			left: []string{
				"fresh", "fresh/profile", "fresh/profile/v0", "fresh/profile/v0/.version.json",
				"fresh/profile/v0/region=eu", "fresh/profile/v0/region=eu/.0123456789abcdef0123456789abcdef.0.parquet.tmp",
				"fresh/profile/v0/region=us", "fresh/profile/v0/region=us/.fedcba9876543210fedcba9876543210.0.parquet.tmp",
			},
		},
		{
			name: "a log head without its records",
			make: func(t *testing.T, s *store.Store, dir string) {
				killedWhileStreaming(t, s, dir, old)
				writeFile(t, filepath.Join(dir, "fresh", "profile", ".log", "HEAD"), `{"seq":3,"hash":"`+strings.Repeat("ab", 32)+`"}`, old)
			},
			verify: []string{
				"chain_broken fresh/profile/.log",
				"orphan fresh/profile/v0",
				"stale_temp fresh/profile/v0/region=eu/.0123456789abcdef0123456789abcdef.0.parquet.tmp",
				"stale_temp fresh/profile/v0/region=us/.fedcba9876543210fedcba9876543210.0.parquet.tmp",
			},
			skipped: []string{"chain_broken fresh/profile"},
			left: []string{
				"fresh", "fresh/profile", "fresh/profile/.log", "fresh/profile/.log/HEAD", "fresh/profile/v0", "fresh/profile/v0/.version.json",
				"fresh/profile/v0/region=eu", "fresh/profile/v0/region=eu/.0123456789abcdef0123456789abcdef.0.parquet.tmp",
				"fresh/profile/v0/region=us", "fresh/profile/v0/region=us/.fedcba9876543210fedcba9876543210.0.parquet.tmp",
			},
		},
		{
			name: "a pyrosome version beside",
			make: func(t *testing.T, s *store.Store, dir string) {
				killedWhileStreaming(t, s, dir, old)
				writeFile(t, filepath.Join(dir, "fresh", "profile", "v1", "0.parquet"), string(readFile(t, filepath.Join(pyrosomeFixture, "events", "v0", "1.parquet"))), old)
				touchOld(t, filepath.Join(dir, "fresh", "profile", "v1"), old)
			},
			verify: []string{
				"orphan fresh/profile/v0",
				"stale_temp fresh/profile/v0/region=eu/.0123456789abcdef0123456789abcdef.0.parquet.tmp",
				"stale_temp fresh/profile/v0/region=us/.fedcba9876543210fedcba9876543210.0.parquet.tmp",
				"unknown fresh/profile/v1",
			},
			swept:   []string{"fresh/profile/v0"},
			skipped: []string{"unknown fresh/profile/v1"},
			left:    []string{"fresh", "fresh/profile", "fresh/profile/v1", "fresh/profile/v1/0.parquet"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, dir := newStore(t)
			ctx := context.Background()
			other := []string{"other", "p"}
			put(t, s, store.ModeWrite, other, ids(1), store.PutOptions{})
			c.make(t, s, dir)
			committed := hashTree(t, filepath.Join(dir, "other"))

			// Readers and listings never see it.
			if got := listed(t, s); got != "other/p" {
				t.Fatalf("listed %s", got)
			}
			if _, _, err := s.Versions(ctx, firstPutKeys); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("versions of a profile never committed: %v", err)
			}
			vr, err := maint.Verify(ctx, s, maint.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(problems(vr.Problems), "\n"); got != strings.Join(c.verify, "\n") {
				t.Errorf("verify:\n  %s\nwant\n  %s", strings.ReplaceAll(got, "\n", "\n  "), strings.Join(c.verify, "\n  "))
			}
			if vr.OK != (len(c.verify) == 0) {
				t.Errorf("verify ok=%v", vr.OK)
			}

			rep, err := maint.Sweep(ctx, s, maint.DefaultStaleAfter)
			if err != nil {
				t.Fatal(err)
			}
			got := append([]string(nil), rep.Removed...)
			sort.Strings(got)
			if strings.Join(got, ",") != strings.Join(c.swept, ",") {
				t.Errorf("swept\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(c.swept, "\n  "))
			}
			if g := strings.Join(problems(rep.Skipped), ","); g != strings.Join(c.skipped, ",") {
				t.Errorf("skipped %s, want %s (%+v)", g, strings.Join(c.skipped, ","), rep.Skipped)
			}
			var left []string
			if _, err := os.Stat(filepath.Join(dir, "fresh")); err == nil {
				for _, rel := range tree(t, filepath.Join(dir, "fresh")) {
					left = append(left, "fresh/"+rel)
				}
				left = append([]string{"fresh"}, left...)
			}
			if strings.Join(left, ",") != strings.Join(c.left, ",") {
				t.Errorf("left\n  %s\nwant\n  %s", strings.Join(left, "\n  "), strings.Join(c.left, "\n  "))
			}
			after := hashTree(t, filepath.Join(dir, "other"))
			if fmt.Sprint(after) != fmt.Sprint(committed) {
				t.Errorf("the committed profile changed")
			}
			if got := listed(t, s); got != "other/p" {
				t.Fatalf("listed after the sweep %s", got)
			}
			if len(c.skipped) == 0 && len(c.left) == 0 || c.reusable {
				// A second sweep has nothing left to do, and verify finds
				// nothing more.
				again, err := maint.Sweep(ctx, s, maint.DefaultStaleAfter)
				if err != nil || len(again.Removed) != 0 {
					t.Fatalf("second sweep: %+v %v", again, err)
				}
				if vr, err := maint.Verify(ctx, s, maint.VerifyOptions{}); err != nil || !vr.OK {
					t.Fatalf("verify after the sweep: %+v %v", vr, err)
				}
			}
			if c.reusable {
				// The profile is created by the next first put, as if
				// nothing had happened.
				put(t, s, store.ModeWrite, firstPutKeys, ids(7, 8), store.PutOptions{})
				if got := readIDs(t, s, firstPutKeys, -1); fmt.Sprint(got) != "[7 8]" {
					t.Fatalf("rows %v", got)
				}
				if p, err := s.Policy(ctx, firstPutKeys); err != nil || p.SchemaPolicy != store.PolicyNone {
					t.Fatalf("the new profile's policy: %+v %v (the killed put's stayed?)", p, err)
				}
				if vr, err := maint.Verify(ctx, s, maint.VerifyOptions{}); err != nil || !vr.OK {
					t.Fatalf("verify after the first put: %+v %v", vr, err)
				}
			}
		})
	}
}

// TestSweepZeroNeverCommittedProfile: Sweep(0), as the z01 reproducer
// runs it after a restart, removes a killed first put's leftovers however
// young, once their writer is gone.
func TestSweepZeroNeverCommittedProfile(t *testing.T) {
	for _, stage := range []string{"streaming", "commit"} {
		t.Run(stage, func(t *testing.T) {
			s, dir := newStore(t)
			ctx := context.Background()
			if stage == "streaming" {
				killedWhileStreaming(t, s, dir, 0)
			} else {
				killedDuringCommit(t, s, dir, 0)
			}
			time.Sleep(20 * time.Millisecond)
			rep, err := maint.Sweep(ctx, s, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Skipped) > 0 {
				t.Errorf("skipped %+v", rep.Skipped)
			}
			var left []string
			if _, err := os.Stat(filepath.Join(dir, "fresh")); err == nil {
				left = tree(t, filepath.Join(dir, "fresh"))
			}
			want := ""
			if stage == "commit" {
				want = ".quiver.kind" // the parent's marker
			}
			if strings.Join(left, ",") != want {
				t.Fatalf("left in fresh/ after Sweep(0): %v (removed %v)", left, rep.Removed)
			}
		})
	}
}

// twoBatches is a reader of two batches of JSON rows.
func twoBatches(t *testing.T, sc *arrow.Schema, a, b string) array.RecordReader {
	t.Helper()
	var recs []arrow.RecordBatch
	for _, rows := range []string{a, b} {
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(rows))
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		recs = append(recs, rec)
	}
	rdr, err := array.NewRecordReader(sc, recs)
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

// TestSweepSparesLiveFirstPut: a first put of this process, creating its
// profile and paused while it streams, loses nothing to Sweep(0) or to a
// sweep by the default age, is no problem of verify, and commits.
func TestSweepSparesLiveFirstPut(t *testing.T) {
	for _, partitioned := range []bool{false, true} {
		t.Run(fmt.Sprintf("partitioned %v", partitioned), func(t *testing.T) {
			s, dir := newStore(t)
			ctx := context.Background()
			keys := []string{"live", "first"}
			o := store.PutOptions{Mode: store.ModeWrite, SchemaPolicy: store.PolicyAdditive}
			var inner array.RecordReader
			if partitioned {
				o.PartitionBy = []string{"region"}
				inner = twoBatches(t, regionSchema, `[{"id":1,"region":"eu"},{"id":2,"region":"us"}]`, `[{"id":3,"region":"eu"}]`)
			} else {
				inner = twoBatches(t, idSchema, `[{"id":1},{"id":2}]`, `[{"id":3}]`)
			}
			defer inner.Release()
			rdr := &pausingReader{RecordReader: inner, paused: make(chan struct{}), release: make(chan struct{})}
			done := make(chan error, 1)
			go func() {
				_, err := s.Put(ctx, keys, rdr, o)
				done <- err
			}()
			<-rdr.paused
			before := hashTree(t, dir)
			if len(before) == 0 {
				t.Fatal("the put has nothing on disk yet")
			}
			for _, age := range []time.Duration{0, maint.DefaultStaleAfter} {
				rep, err := maint.Sweep(ctx, s, age)
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Removed)+len(rep.Skipped) > 0 {
					t.Errorf("Sweep(%s) while a first put streams: removed %v, skipped %+v", age, rep.Removed, rep.Skipped)
				}
			}
			vr, err := maint.Verify(ctx, s, maint.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range vr.Problems {
				t.Errorf("verify while a first put streams: %s %s: %s", p.Kind, p.Path, p.Detail)
			}
			if after := hashTree(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("the put's files changed under it:\n%v\n%v", before, after)
			}
			close(rdr.release)
			if err := <-done; err != nil {
				t.Fatalf("the put, swept meanwhile: %v", err)
			}
			if got := readIDs(t, s, keys, -1); len(got) != 3 {
				t.Fatalf("rows %v", got)
			}
			if p, err := s.Policy(ctx, keys); err != nil || p.SchemaPolicy != store.PolicyAdditive {
				t.Fatalf("policy %+v %v", p, err)
			}
			if vr, err := maint.Verify(ctx, s, maint.VerifyOptions{}); err != nil || !vr.OK {
				t.Fatalf("verify after the put: %+v %v", vr, err)
			}
		})
	}
}

// TestSweepNeverCommittedRecheckUnderLock: a first put that commits the
// profile between sweep's look at the killed first put's leftovers and
// the moment sweep holds the lock keeps everything it committed; sweep,
// looking again under the lock, removes only the dead writer's version.
func TestSweepNeverCommittedRecheckUnderLock(t *testing.T) {
	s, dir := newStore(t)
	ctx := context.Background()
	killedWhileStreaming(t, s, dir, time.Hour)
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := &lockHookFS{FS: l, hook: func() {
		put(t, s, store.ModeWrite, firstPutKeys, ids(5, 6), store.PutOptions{}) // v1
	}}
	sweeper, err := store.Open(dir, store.WithFS(h))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := maint.Sweep(ctx, sweeper, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if h.hook != nil {
		t.Fatal("sweep never took the lock")
	}
	if fmt.Sprint(rep.Removed) != "[fresh/profile/v0]" {
		t.Fatalf("removed %v", rep.Removed)
	}
	if got := readIDs(t, s, firstPutKeys, -1); fmt.Sprint(got) != "[5 6]" {
		t.Fatalf("rows %v", got)
	}
	for _, p := range []string{"manifest.json", ".quiver.kind", "v1"} {
		if _, err := os.Stat(filepath.Join(dir, "fresh", "profile", p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if vr, err := maint.Verify(ctx, s, maint.VerifyOptions{}); err != nil || !vr.OK {
		t.Fatalf("verify: %+v %v", vr, err)
	}
}

// listed lists the profiles ListProfiles shows, comma-separated.
func listed(t *testing.T, s *store.Store) string {
	t.Helper()
	var out []string
	err := s.ListProfiles(context.Background(), nil, func(ps store.ProfileSummary) error {
		out = append(out, ps.Path())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, ",")
}

// TestSweepZeroRacingFirstPuts: Sweep(0) in a loop while puts of this
// process create new profiles (each its own, and several the same one),
// some where killed first puts left versions: every put commits (none
// loses its version, reserved or not, to the sweep) and reads back whole,
// the killed puts' leftovers go, and the data directory verifies clean.
func TestSweepZeroRacingFirstPuts(t *testing.T) {
	s, dir := newStore(t)
	put(t, s, store.ModeWrite, []string{"scratch"}, ids(0), store.PutOptions{})
	info := versionInfoAt(t, filepath.Join(dir, "scratch", "v0", ".version.json"), time.Now().Add(-time.Hour))
	if err := os.RemoveAll(filepath.Join(dir, "scratch")); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"same/p0/v0", "same/p3/v0", "same/p3/v1", "new/w0-1/v0", "dead/a/v0", "dead/b/v2"} {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(rel), ".version.json"), info, time.Hour)
		writeFile(t, filepath.Join(dir, filepath.FromSlash(rel), ".0123456789abcdef0123456789abcdef.0.parquet.tmp"), "PAR1", time.Hour)
	}
	ctx, cancel := context.WithCancel(context.Background())
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		for ctx.Err() == nil {
			if _, err := maint.Sweep(ctx, s, 0); err != nil && ctx.Err() == nil {
				t.Errorf("sweep: %v", err)
			}
		}
	}()
	type result struct {
		keys []string
		id   int64
		err  error
	}
	results := make(chan result, 256)
	var n int64
	done := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 15 {
				keys := []string{"new", fmt.Sprintf("w%d-%d", w, i)}
				if i%3 == 0 {
					keys = []string{"same", fmt.Sprintf("p%d", i)} // every writer creates it
				}
				id := int64(w*1000 + i)
				o := store.PutOptions{Mode: store.ModeWrite}
				var rdr array.RecordReader
				if i%2 == 0 {
					o.PartitionBy = []string{"region"}
					rdr = fromJSON(t, regionSchema, fmt.Sprintf(`[{"id":%d,"region":"eu"},{"id":%d,"region":"us"}]`, id, id))
				} else {
					rdr = ids(id, id)
				}
				_, err := s.Put(context.Background(), keys, rdr, o)
				rdr.Release()
				results <- result{keys, id, err}
			}
		}()
	}
	for range 4 {
		<-done
	}
	cancel()
	<-swept
	close(results)
	committed := map[string]bool{}
	for r := range results {
		n++
		switch {
		case r.err == nil:
			committed[store.ProfilePath(r.keys)] = true
			if r.keys[0] == "new" {
				if got := readIDs(t, s, r.keys, -1); fmt.Sprint(got) != fmt.Sprintf("[%d %d]", r.id, r.id) {
					t.Errorf("%v: rows %v", r.keys, got)
				}
			}
		default:
			t.Errorf("put %v, swept under it: %v", r.keys, r.err)
		}
	}
	rep, err := maint.Sweep(context.Background(), s, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d puts, %d profiles committed; the last sweep removed %v", n, len(committed), rep.Removed)
	if vr, err := maint.Verify(context.Background(), s, maint.VerifyOptions{StaleAfter: time.Nanosecond}); err != nil || !vr.OK {
		t.Fatalf("verify: %+v %v", vr, err)
	}
	// What the killed puts left is gone (a put may have taken their
	// version numbers since), and so is what only they made.
	for _, rel := range []string{"dead", "same/p0/v0", "same/p3/v0", "same/p3/v1", "new/w0-1/v0"} {
		tmp := filepath.Join(dir, filepath.FromSlash(rel), ".0123456789abcdef0123456789abcdef.0.parquet.tmp")
		if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s, a killed put's, not swept: %v", rel, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "dead")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dead/ not swept: %v", err)
	}
	for _, top := range []string{"new", "same"} {
		entries, _ := os.ReadDir(filepath.Join(dir, top))
		for _, e := range entries {
			if p := top + "/" + e.Name(); !strings.HasPrefix(e.Name(), ".") && !committed[p] {
				t.Errorf("%s left by puts that never committed", p)
			}
		}
	}
}
