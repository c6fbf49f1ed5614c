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

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

// versionInfoTemp is the temp a write names its .version.json while it
// writes it (.<id>.<name>.tmp).
const versionInfoTemp = ".0123456789abcdef0123456789abcdef..version.json.tmp"

// killedVersion lays out, under keys' directory, the version v0 of a first
// put of keys killed while it streamed, aged age: its .version.json (its
// creator pid, deadPID when creator is 0) and the hidden temp of the file
// it was encoding.
func killedVersion(t *testing.T, s *store.Store, dir string, keys []string, age time.Duration, creator int) {
	t.Helper()
	scratch := []string{"scratch", "s"}
	put(t, s, store.ModeWrite, scratch, ids(1), store.PutOptions{})
	info := versionInfoAt(t, filepath.Join(dir, "scratch", "s", "v0", ".version.json"), time.Now().Add(-age))
	if err := os.RemoveAll(filepath.Join(dir, "scratch")); err != nil {
		t.Fatal(err)
	}
	if creator != 0 {
		var m map[string]any
		if err := json.Unmarshal([]byte(info), &m); err != nil {
			t.Fatal(err)
		}
		host, _ := os.Hostname()
		m["creator"] = map[string]any{"host": host, "pid": creator}
		b, _ := json.Marshal(m)
		info = string(b)
	}
	vdir := filepath.Join(append([]string{dir}, append(keys, "v0")...)...)
	writeFile(t, filepath.Join(vdir, ".version.json"), info, age)
	writeFile(t, filepath.Join(vdir, ".fedcba9876543210fedcba9876543210.0.parquet.tmp"), "PAR1 half a row group", age)
	touchOld(t, vdir, age)
}

// killedNestedCommit lays out what a first put of n/c, begun before n was
// created, leaves when killed in its commit (red team round 26's a02): its
// staged partitioned version, and its lock, its owner gone.
func killedNestedCommit(t *testing.T, s *store.Store, dir string, age time.Duration) {
	t.Helper()
	nc := []string{"n", "c"}
	uncommittedVersion(t, s, dir, nc, 0, func(scratch []string) {
		put(t, s, store.ModeWrite, scratch, fromJSON(t, regionSchema, `[{"id":1,"region":"eu"},{"id":2,"region":"us"}]`), store.PutOptions{PartitionBy: []string{"region"}})
	})
	vi := filepath.Join(dir, "n", "c", "v0", ".version.json")
	writeFile(t, vi, versionInfoAt(t, vi, time.Now().Add(-age)), age)
	host, _ := os.Hostname()
	lock, _ := json.Marshal(store.Owner{Host: host, PID: deadPID(t), Time: time.Now().Add(-age)})
	writeFile(t, filepath.Join(dir, "n", "c", "manifest.json.write_lock"), string(lock), age)
	err := filepath.WalkDir(filepath.Join(dir, "n", "c"), func(p string, d os.DirEntry, err error) error {
		if err == nil {
			touchOld(t, p, age)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// versionInfoTempOnly lays out what a first put of keys leaves when killed
// while it writes its .version.json (red team round 26's a03): the version
// directory it reserved, holding only that temp, aged age.
func versionInfoTempOnly(t *testing.T, dir string, keys []string, age time.Duration) {
	t.Helper()
	vdir := filepath.Join(append([]string{dir}, append(keys, "v0")...)...)
	writeFile(t, filepath.Join(vdir, versionInfoTemp), `{"format":"parq`, age)
	touchOld(t, vdir, age)
}

// TestSweepNeverCommittedRound26 (red team round 26): what killed first
// puts leave where the walk of sweep and verify did not look — in a
// directory that became a parent of profiles meanwhile (a01), below a
// profile holding the killed put's lock (a02), a version holding only its
// .version.json temp (a03) — is reported by verify and removed by sweep by
// the rules of z01 (age, the creator alive, the lock); nothing committed
// changes, and a live creator's version stays.
func TestSweepNeverCommittedRound26(t *testing.T) {
	const old = 2 * time.Hour
	n, nc := []string{"n"}, []string{"n", "c"}
	cases := []struct {
		name      string
		committed []string // the profile put first
		make      func(t *testing.T, s *store.Store, dir string)
		verify    []string // "kind path", sorted (stale after 1 h)
		swept     []string // by Sweep(1 h), sorted
		left      []string // what stays of n/ and fresh/ outside the committed profile
	}{
		{
			name:      "a01 a first put of a profile that became a parent",
			committed: nc,
			make:      func(t *testing.T, s *store.Store, dir string) { killedVersion(t, s, dir, n, old, 0) },
			verify:    []string{"orphan n/v0", "stale_temp n/v0/.fedcba9876543210fedcba9876543210.0.parquet.tmp"},
			swept:     []string{"n/v0"},
			left:      []string{"n", "n/.quiver.kind"}, // the parent's marker
		},
		{
			name:      "a01 young",
			committed: nc,
			make:      func(t *testing.T, s *store.Store, dir string) { killedVersion(t, s, dir, n, 0, 0) },
			left:      []string{"n", "n/.quiver.kind", "n/v0", "n/v0/.fedcba9876543210fedcba9876543210.0.parquet.tmp", "n/v0/.version.json"},
		},
		{
			name:      "a01 its creator alive on this host",
			committed: nc,
			make:      func(t *testing.T, s *store.Store, dir string) { killedVersion(t, s, dir, n, old, os.Getpid()) },
			// The temp is old (its writer stalled): reported, and left
			// with its version while its creator runs.
			verify: []string{"stale_temp n/v0/.fedcba9876543210fedcba9876543210.0.parquet.tmp"},
			left:   []string{"n", "n/.quiver.kind", "n/v0", "n/v0/.fedcba9876543210fedcba9876543210.0.parquet.tmp", "n/v0/.version.json"},
		},
		{
			name:      "a02 below a profile, killed in its commit holding its lock",
			committed: n,
			make:      func(t *testing.T, s *store.Store, dir string) { killedNestedCommit(t, s, dir, old) },
			verify:    []string{"orphan n/c/v0", "stale_lock n/c/manifest.json.write_lock"},
			swept:     []string{"n/c", "n/c/v0"},
		},
		{
			// As for z01's: nothing to remove yet, the lock is reported
			// (and taken over by the next writer, or the sweep that
			// removes the version once it is old).
			name:      "a02 young",
			committed: n,
			make:      func(t *testing.T, s *store.Store, dir string) { killedNestedCommit(t, s, dir, 0) },
			verify:    []string{"stale_lock n/c/manifest.json.write_lock"},
		},
		{
			name: "a03 a version holding only its .version.json temp",
			make: func(t *testing.T, s *store.Store, dir string) {
				versionInfoTempOnly(t, dir, firstPutKeys, old)
				touchOld(t, filepath.Join(dir, "fresh", "profile"), old)
			},
			verify: []string{"orphan fresh/profile/v0", "stale_temp fresh/profile/v0/" + versionInfoTemp},
			swept:  []string{"fresh", "fresh/profile", "fresh/profile/v0"},
		},
		{
			name: "a03 young",
			make: func(t *testing.T, s *store.Store, dir string) { versionInfoTempOnly(t, dir, firstPutKeys, 0) },
			left: []string{"fresh", "fresh/profile", "fresh/profile/v0", "fresh/profile/v0/" + versionInfoTemp},
		},
		{
			name:      "a03 below a profile",
			committed: n,
			make:      func(t *testing.T, s *store.Store, dir string) { versionInfoTempOnly(t, dir, nc, old) },
			verify:    []string{"orphan n/c/v0", "stale_temp n/c/v0/" + versionInfoTemp},
			swept:     []string{"n/c", "n/c/v0"},
		},
		{
			name:      "a03 in a directory that became a parent",
			committed: nc,
			make:      func(t *testing.T, s *store.Store, dir string) { versionInfoTempOnly(t, dir, n, old) },
			verify:    []string{"orphan n/v0", "stale_temp n/v0/" + versionInfoTemp},
			swept:     []string{"n/v0"},
			left:      []string{"n", "n/.quiver.kind"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, dir := newStore(t)
			ctx := context.Background()
			other := []string{"other", "p"}
			put(t, s, store.ModeWrite, other, ids(1), store.PutOptions{})
			var committed []string
			if c.committed != nil {
				put(t, s, store.ModeWrite, c.committed, ids(2, 3), store.PutOptions{})
				committed = c.committed
			}
			c.make(t, s, dir)
			hashes := func() string {
				h := fmt.Sprint(hashTree(t, filepath.Join(dir, "other")))
				if committed != nil {
					p := filepath.Join(append([]string{dir}, committed...)...)
					for _, rel := range []string{"manifest.json", ".log", "v0", ".quiver.kind"} {
						h += fmt.Sprint(hashTree(t, filepath.Join(p, rel)))
						b, _ := os.ReadFile(filepath.Join(p, rel))
						h += string(b)
					}
				}
				return h
			}
			before := hashes()

			vr, err := maint.Verify(ctx, s, maint.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(problems(vr.Problems), "\n"); got != strings.Join(c.verify, "\n") {
				t.Errorf("verify:\n  %s\nwant\n  %s", strings.ReplaceAll(got, "\n", "\n  "), strings.Join(c.verify, "\n  "))
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
			if len(rep.Skipped) > 0 {
				t.Errorf("skipped %+v", rep.Skipped)
			}
			var left []string
			for _, top := range []string{"n", "fresh"} {
				if _, err := os.Stat(filepath.Join(dir, top)); err != nil {
					continue
				}
				left = append(left, top)
				for _, rel := range tree(t, filepath.Join(dir, top)) {
					p := top + "/" + rel
					if committed != nil && (p == store.ProfilePath(committed) || strings.HasPrefix(p, store.ProfilePath(committed)+"/")) {
						continue
					}
					left = append(left, p)
				}
			}
			if committed != nil && store.ProfilePath(committed) == "n" {
				left = left[1:] // n is the committed profile
			}
			if strings.Join(left, ",") != strings.Join(c.left, ",") {
				t.Errorf("left\n  %s\nwant\n  %s", strings.Join(left, "\n  "), strings.Join(c.left, "\n  "))
			}
			if _, err := os.Stat(filepath.Join(dir, "n", "c", "manifest.json.write_lock")); err == nil && len(c.swept) > 0 {
				t.Errorf("the dead writer's lock is still there")
			}
			if hashes() != before {
				t.Errorf("a committed profile changed")
			}
			if committed != nil {
				if got := readIDs(t, s, committed, -1); fmt.Sprint(got) != "[2 3]" {
					t.Fatalf("rows of %v: %v", committed, got)
				}
			}
			if len(c.swept) > 0 {
				// Nothing more to do; verify is clean.
				again, err := maint.Sweep(ctx, s, maint.DefaultStaleAfter)
				if err != nil || len(again.Removed)+len(again.Skipped) != 0 {
					t.Fatalf("second sweep: %+v %v", again, err)
				}
				if vr, err := maint.Verify(ctx, s, maint.VerifyOptions{}); err != nil || !vr.OK {
					t.Fatalf("verify after the sweep: %+v %v", vr, err)
				}
			}
		})
	}
}

// TestSweepSparesLiveFirstPutOfAParent: a first put of n of this process,
// paused while it streams, while another put creates n/c (n is now a
// parent): Sweep(0) and Sweep(1 h) leave its files alone, verify reports
// nothing of them, and the put fails as a nested profile (not for files
// swept under it) once it goes on.
func TestSweepSparesLiveFirstPutOfAParent(t *testing.T) {
	s, dir := newStore(t)
	ctx := context.Background()
	inner := twoBatches(t, idSchema, `[{"id":1},{"id":2}]`, `[{"id":3}]`)
	defer inner.Release()
	rdr := &pausingReader{RecordReader: inner, paused: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, []string{"n"}, array.RecordReader(rdr), store.PutOptions{Mode: store.ModeWrite})
		done <- err
	}()
	<-rdr.paused
	put(t, s, store.ModeWrite, []string{"n", "c"}, ids(5), store.PutOptions{})
	before := hashTree(t, filepath.Join(dir, "n"))
	for _, age := range []time.Duration{0, maint.DefaultStaleAfter} {
		rep, err := maint.Sweep(ctx, s, age)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Removed)+len(rep.Skipped) > 0 {
			t.Errorf("Sweep(%s) while the first put of n streams: removed %v, skipped %+v", age, rep.Removed, rep.Skipped)
		}
	}
	vr, err := maint.Verify(ctx, s, maint.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range vr.Problems {
		t.Errorf("verify while the first put of n streams: %s %s: %s", p.Kind, p.Path, p.Detail)
	}
	if after := hashTree(t, filepath.Join(dir, "n")); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the put's files changed under it:\n%v\n%v", before, after)
	}
	close(rdr.release)
	if err := <-done; !errors.Is(err, store.ErrNestedProfile) {
		t.Fatalf("the put of n, above n/c: %v", err)
	}
	if got := readIDs(t, s, []string{"n", "c"}, -1); fmt.Sprint(got) != "[5]" {
		t.Fatalf("rows of n/c %v", got)
	}
}
