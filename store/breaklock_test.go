package store

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestBreakLock(t *testing.T) {
	host, _ := os.Hostname()
	const limit = 10 * time.Minute
	lockJSON := func(h string, pid int, age time.Duration) string {
		b, _ := json.Marshal(LockInfo{Host: h, PID: pid, Time: time.Now().Add(-age).UTC(), Writer: "w"})
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
		{"live owner", ptr(lockJSON(host, os.Getpid(), time.Minute)), 0, false, "live"},
		{"live owner past the limit", ptr(lockJSON(host, os.Getpid(), 2*limit)), 0, true, "stale limit"},
		{"dead owner", ptr(lockJSON(host, deadPID(t), time.Second)), 0, true, "gone"},
		{"other host, fresh", ptr(lockJSON("elsewhere", 1, time.Minute)), 0, false, "cannot be checked"},
		{"other host, old", ptr(lockJSON("elsewhere", 1, 2*limit)), 0, true, "stale limit"},
		{"pyrosome empty lock, fresh", ptr(""), 0, false, "unknown owner"},
		{"pyrosome empty lock, old", ptr(""), 2 * limit, true, "stale limit"},
		{"garbage lock, old", ptr("{not json"), 2 * limit, true, "stale limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logBuf strings.Builder
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
			if res.Broken != c.broken || !strings.Contains(res.Reason, c.because) {
				t.Fatalf("got %+v, want broken=%v because %q", res, c.broken, c.because)
			}
			_, serr := os.Stat(lp)
			if exists := serr == nil; exists != (c.lock != nil && !c.broken) {
				t.Fatalf("lock exists=%v after %+v", exists, res)
			}
			if logged := strings.Contains(logBuf.String(), "manifest lock broken"); logged != c.broken {
				t.Fatalf("logged=%v: %s", logged, logBuf.String())
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
}

func ptr[T any](v T) *T { return &v }
