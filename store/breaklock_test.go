package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func touchOld(t *testing.T, p string, age time.Duration) {
	t.Helper()
	old := time.Now().Add(-age)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p string, data string, age time.Duration) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if age > 0 {
		touchOld(t, p, age)
	}
}

// deadPID returns the pid of a process that has exited (and been reaped).
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func ptr[T any](v T) *T { return &v }

// syncLog is a goroutine-safe log sink.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBreakLock: BreakLock removes a lock only when its owner is provably
// gone (judged from this machine's process table) or it is older than the
// stale limit, says why either way, and logs what it broke.
func TestBreakLock(t *testing.T) {
	host, _ := os.Hostname()
	const limit = 10 * time.Minute
	self := newIdentity(host, os.Getpid(), linuxProcs{}, "")
	lockJSON := func(o Owner, age time.Duration) string {
		o.Time = time.Now().Add(-age).UTC()
		o.Writer = "w"
		b, _ := json.Marshal(o)
		return string(b)
	}
	cases := []struct {
		name    string
		lock    *string       // nil: no lock file
		mtime   time.Duration // age of the file's mtime
		broken  bool
		because string
	}{
		{"no lock", nil, 0, false, "not locked"},
		{"live owner", ptr(lockJSON(Owner{Host: host, PID: os.Getpid()}, time.Minute)), 0, false, "live"},
		{"live owner, full identity", ptr(lockJSON(self, time.Minute)), 0, false, "live"},
		{"live owner past the limit", ptr(lockJSON(Owner{Host: host, PID: os.Getpid()}, 2*limit)), 0, true, "stale limit"},
		{"dead owner", ptr(lockJSON(Owner{Host: host, PID: deadPID(t)}, time.Second)), 0, true, "gone"},
		{"dead owner, full identity", ptr(lockJSON(Owner{Host: host, Boot: self.Boot, PID: deadPID(t), Start: 1}, time.Second)), 0, true, "gone"},
		{"pid reused by a later process", ptr(lockJSON(Owner{Host: host, Boot: self.Boot, PID: os.Getpid(), Start: self.Start + 1}, time.Second)), 0, self.Start != 0, "gone"},
		{"same host name, another boot", ptr(lockJSON(Owner{Host: host, Boot: "another-boot", PID: deadPID(t)}, time.Second)), 0, false, "cannot be checked"},
		{"other host, fresh", ptr(lockJSON(Owner{Host: "elsewhere", PID: 1}, time.Minute)), 0, false, "cannot be checked"},
		{"other host, old", ptr(lockJSON(Owner{Host: "elsewhere", PID: 1}, 2*limit)), 0, true, "stale limit"},
		{"pyrosome empty lock, fresh", ptr(""), 0, false, "unknown owner"},
		{"pyrosome empty lock, old", ptr(""), 2 * limit, true, "stale limit"},
		{"garbage lock, old", ptr("{not json"), 2 * limit, true, "stale limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "pid reused by a later process" && self.Start == 0 {
				t.Skip("no process start times here (no procfs)")
			}
			var logBuf syncLog
			s, dir := newTestStore(t, WithLockStaleAfter(limit), WithLogger(zerolog.New(&logBuf)))
			k := []string{"p"}
			put(t, s, ModeWrite, k, ids(1), PutOptions{})
			lp := filepath.Join(dir, "p", lockName)
			if c.lock != nil {
				writeFile(t, lp, *c.lock, c.mtime)
			}
			res, err := s.BreakLock(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			because := c.because
			if boot := (linuxProcs{}).bootTime(); c.mtime > 0 && !boot.IsZero() && time.Now().Add(-c.mtime).Before(boot) {
				// An unknown owner's lock whose file is older than this
				// machine's uptime (a machine booted minutes ago, as CI's
				// are) is stale for that reason first.
				because = "before this machine booted"
			}
			if res.Broken != c.broken || !strings.Contains(res.Reason, because) {
				t.Fatalf("got %+v, want broken=%v because %q", res, c.broken, because)
			}
			_, serr := os.Stat(lp)
			if exists := serr == nil; exists != (c.lock != nil && !c.broken) {
				t.Fatalf("lock exists=%v after %+v", exists, res)
			}
			if logged := strings.Contains(logBuf.String(), "manifest lock broken"); logged != c.broken {
				t.Fatalf("logged=%v: %s", logged, logBuf.String())
			}
			if strings.Contains(res.Reason, dir) {
				t.Fatalf("reason shows the server path: %s", res.Reason)
			}
			if c.broken {
				// The profile takes writes again at once.
				put(t, s, ModeWrite, k, ids(2), PutOptions{})
			}
		})
	}
	s, _ := newTestStore(t)
	if _, err := s.BreakLock(context.Background(), []string{"missing"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing profile: %v", err)
	}
	if _, err := s.BreakLock(context.Background(), []string{"v1"}); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("reserved key: %v", err)
	}
}

// TestDeadOwnersLockTakenOver: the next writer takes over the lock of a
// dead owner at once (and says so in the log), waits for a live one's,
// and gives up after the lock timeout with the owner named.
func TestDeadOwnersLockTakenOver(t *testing.T) {
	var logBuf syncLog
	host, _ := os.Hostname()
	s, dir := newTestStore(t, WithLockTimeout(300*time.Millisecond), WithLogger(zerolog.New(&logBuf)))
	k := []string{"t"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	lp := filepath.Join(dir, "t", lockName)
	dead, _ := json.Marshal(Owner{Host: host, PID: deadPID(t), Time: time.Now(), Writer: "killed-job"})
	writeFile(t, lp, string(dead), 0)
	// The dead owner's lock never goes away by itself: with a 300 ms lock
	// timeout, only a takeover lets this put commit.
	put(t, s, ModeAppend, k, ids(2), PutOptions{})
	if !strings.Contains(logBuf.String(), "stale manifest lock taken over") || !strings.Contains(logBuf.String(), "killed-job") {
		t.Errorf("the takeover is not logged with the old owner: %s", logBuf.String())
	}
	if _, err := os.Stat(lp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the lock was not released after the takeover: %v", err)
	}
	live, _ := json.Marshal(Owner{Host: host, PID: os.Getpid(), Time: time.Now(), Writer: "busy-job"})
	writeFile(t, lp, string(live), 0)
	rdr := ids(3)
	defer rdr.Release()
	t0 := time.Now()
	_, err := s.Append(context.Background(), k, rdr, PutOptions{})
	if !errors.Is(err, ErrLockTimeout) || !strings.Contains(err.Error(), "busy-job") || strings.Contains(err.Error(), dir) {
		t.Fatalf("got %v, want ErrLockTimeout naming the owner", err)
	}
	if waited := time.Since(t0); waited < 300*time.Millisecond || waited > 5*time.Second {
		t.Errorf("gave up after %s (lock timeout 300ms)", waited)
	}
	if b, err := os.ReadFile(lp); err != nil || string(b) != string(live) {
		t.Fatalf("a live owner's lock was touched: %q %v", b, err)
	}
	if got := readIDs(t, s, k, Latest); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("rows %v", got)
	}
}

// TestStaleLockTakeoverRace: servers that all find the same dead owner's
// lock take it over one at a time: every put commits, the log stays one
// chain and the manifest ends on the newest write.
func TestStaleLockTakeoverRace(t *testing.T) {
	host, _ := os.Hostname()
	for round := range 5 {
		s, dir := newTestStore(t)
		k := []string{"race"}
		put(t, s, ModeWrite, k, ids(0), PutOptions{})
		dead, _ := json.Marshal(Owner{Host: host, PID: deadPID(t), Time: time.Now()})
		writeFile(t, filepath.Join(dir, "race", lockName), string(dead), 0)
		const servers = 6
		var wg sync.WaitGroup
		errs := make(chan error, servers)
		for i := range servers {
			srv, err := Open(dir, WithLockTimeout(10*time.Second), WithWriter(fmt.Sprintf("srv-%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				rdr := ids(int64(i + 1))
				defer rdr.Release()
				mode := ModeAppend
				if i%2 == 1 {
					mode = ModeWrite
				}
				if _, err := srv.Put(context.Background(), k, rdr, PutOptions{Mode: mode}); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		in, err := s.Inspect(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if len(in.LogProblems) > 0 || len(in.Log) != servers+1 || in.Lock != nil {
			t.Fatalf("round %d: log problems %v, %d records, lock %+v", round, in.LogProblems, len(in.Log), in.Lock)
		}
		newest := 0
		for _, r := range in.Log {
			if r.Mode == ModeWrite {
				newest = max(newest, r.version())
			}
		}
		if in.Latest != newest {
			t.Fatalf("round %d: manifest names v%d, the newest write is v%d", round, in.Latest, newest)
		}
	}
}
