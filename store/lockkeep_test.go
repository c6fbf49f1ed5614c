package store

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/quiverdb/quiver/store/fsys"
)

// burstAcrossCycles puts n appends and one write to k at once, while
// another writer (pyrosome: an empty lock) holds the profile's lock, so
// that they commit in back-to-back cycles (a batch's appends and its
// write commit in two), and returns once all returned. It fails the test
// on any put's error.
func burstAcrossCycles(t *testing.T, s *Store, dir string, k []string, n int) {
	t.Helper()
	lock := filepath.Join(dir, filepath.Join(k...), lockName)
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range n + 1 {
		wg.Go(func() {
			mode := ModeAppend
			if i == n {
				mode = ModeWrite
			}
			rdr := ids(int64(1000 + i))
			defer rdr.Release()
			_, errs[i] = s.Put(context.Background(), k, rdr, PutOptions{Mode: mode})
		})
	}
	ps := s.state(profile{keys: k, dir: filepath.Join(k...)})
	deadline := time.Now().Add(30 * time.Second)
	for ps.commit.waiting.Load() != int64(n+1) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d puts wait for their commit", ps.commit.waiting.Load(), n+1)
		}
		time.Sleep(time.Millisecond)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
}

// TestLockKeptAcrossCycles: back-to-back commit cycles of a busy profile
// take the manifest lock once (the first keeps it for the next), commit
// every put, and leave no lock once the profile is idle.
func TestLockKeptAcrossCycles(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"keep"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	var taken atomic.Int32
	s.OnLockWait(func(_ time.Duration, acquired bool) {
		if acquired {
			taken.Add(1)
		}
	})
	before := s.state(profile{keys: k, dir: "keep"})
	before.mu.Lock()
	head0 := before.log.head
	before.mu.Unlock()
	burstAcrossCycles(t, s, dir, k, 8)
	before.mu.Lock()
	segments := before.log.head - head0
	before.mu.Unlock()
	if segments < 2 {
		t.Fatalf("%d records committed, want the appends and the write in two cycles", segments)
	}
	if got := taken.Load(); got != 1 {
		t.Errorf("the lock was taken %d times for back-to-back cycles, want once", got)
	}
	if got := readLatest(t, s, k); !slices.Equal(got, []int64{1008}) {
		t.Errorf("latest holds %v, want the write's row 1008 alone", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep", lockName)); !os.IsNotExist(err) {
		t.Errorf("lock left behind by an idle profile: %v", err)
	}
}

// betweenCyclesFS hands the first read of a manifest lock that this process
// holds (one with an owner: the kept lock's check by the next cycle) a
// lock taken over meanwhile by another machine's writer (past the stale
// limit, so that it can be taken over in turn).
type betweenCyclesFS struct {
	fsys.FS
	fired atomic.Bool
}

func (f *betweenCyclesFS) ReadFile(ctx context.Context, name string) ([]byte, fsys.Token, error) {
	b, tok, err := f.FS.ReadFile(ctx, name)
	if err != nil || filepath.Base(name) != lockName || len(b) == 0 || f.fired.Swap(true) {
		return b, tok, err
	}
	other, _ := json.Marshal(Owner{Host: "elsewhere", PID: 7, Time: time.Now().Add(-time.Hour)})
	if err := f.Replace(ctx, name, other, tok); err != nil {
		return nil, "", err
	}
	return f.FS.ReadFile(ctx, name)
}

// TestKeptLockTakenOver: a kept lock that another writer took over
// between two cycles is not used by the next cycle, which takes the lock
// again (here: over the other's, stale) and commits; nothing is lost and
// no lock is left.
func TestKeptLockTakenOver(t *testing.T) {
	dir := t.TempDir()
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	fs := &betweenCyclesFS{FS: l}
	var logBuf syncLog
	s, _ := newTestStore(t, WithFS(fs), WithLogger(zerolog.New(&logBuf)))
	k := []string{"keep"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	fs.fired.Store(false)
	burstAcrossCycles(t, s, dir, k, 8)
	if !strings.Contains(logBuf.String(), "manifest lock kept between cycles") {
		t.Fatalf("no cycle found its kept lock taken over; log:\n%s", logBuf.String())
	}
	if got := readLatest(t, s, k); !slices.Equal(got, []int64{1008}) {
		t.Errorf("latest holds %v, want the write's row 1008 alone", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep", lockName)); !os.IsNotExist(err) {
		t.Errorf("lock left behind: %v", err)
	}
}

// readLatest reads the ids of k's latest version, after checking that the
// version before it holds the burst's appends (1000..1007) and the first
// write's row, each once.
func readLatest(t *testing.T, s *Store, k []string) []int64 {
	t.Helper()
	latest, _, err := s.Versions(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	before := readIDs(t, s, k, latest-1)
	slices.Sort(before)
	if want := []int64{1, 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007}; !slices.Equal(before, want) {
		t.Errorf("v%d holds %v, want %v", latest-1, before, want)
	}
	return readIDs(t, s, k, latest)
}

// releaseAfterFS holds the deletion of a manifest lock until answered is
// closed (or a second has passed, which it records as early).
type releaseAfterFS struct {
	fsys.FS
	answered chan struct{}
	early    atomic.Bool
}

func (f *releaseAfterFS) Delete(ctx context.Context, name string) error {
	if filepath.Base(name) == lockName {
		select {
		case <-f.answered:
		case <-time.After(time.Second):
			f.early.Store(true)
		}
	}
	return f.FS.Delete(ctx, name)
}

// TestKeptLockReleasedWhenNextBatchCancelled: a cycle that kept the lock
// for the puts queued behind it, all of which were cancelled before their
// cycle, leaves the lock to the leader, which releases it once it has
// answered them (not before: the lock is kept, so its deletion waits for
// the cancelled put's answer here), and the profile is left unlocked.
func TestKeptLockReleasedWhenNextBatchCancelled(t *testing.T) {
	dir := t.TempDir()
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	fs := &releaseAfterFS{FS: l, answered: make(chan struct{})}
	close(fs.answered) // the first write's lock goes at once
	s, _ := newTestStore(t, WithFS(fs))
	k := []string{"cancel"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	fs.answered = make(chan struct{})
	lock := filepath.Join(dir, "cancel", lockName)
	if err := os.WriteFile(lock, nil, 0o644); err != nil { // another writer holds it
		t.Fatal(err)
	}
	ps := s.state(profile{keys: k, dir: "cancel"})
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s", what)
			}
		}
	}
	var first error
	var wg sync.WaitGroup
	wg.Go(func() {
		rdr := ids(2)
		defer rdr.Release()
		_, first = s.Put(context.Background(), k, rdr, PutOptions{Mode: ModeAppend})
	})
	// The first append is in its cycle (waiting for the lock), not queued.
	waitFor("the first append's cycle waits for the lock", func() bool {
		ps.commit.mu.Lock()
		defer ps.commit.mu.Unlock()
		return ps.commit.waiting.Load() == 1 && len(ps.commit.queue) == 0
	})
	ctx, cancel := context.WithCancel(context.Background())
	var second error
	wg.Go(func() {
		rdr := ids(3)
		defer rdr.Release()
		_, second = s.Put(ctx, k, rdr, PutOptions{Mode: ModeAppend})
		close(fs.answered)
	})
	waitFor("the second append is queued", func() bool { return ps.commit.waiting.Load() == 2 })
	cancel()
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if first != nil {
		t.Fatalf("first append: %v", first)
	}
	if !errors.Is(second, context.Canceled) {
		t.Fatalf("cancelled append: %v, want context.Canceled", second)
	}
	waitFor("the kept lock is released", func() bool {
		_, err := os.Stat(lock)
		return os.IsNotExist(err)
	})
	if fs.early.Load() {
		t.Error("the lock was released before the cancelled put was answered: the cycle did not keep it")
	}
	if got := readIDs(t, s, k, Latest); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("latest holds %v, want [1 2]", got)
	}
}
