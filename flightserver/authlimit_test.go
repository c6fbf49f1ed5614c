package flightserver

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"golang.org/x/crypto/bcrypt"
)

// TestPasswordGate checks each bound of the gate on its own.
func TestPasswordGate(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	gate := func(l PasswordLimits) *passwordGate {
		g := newPasswordGate(l, newMetrics())
		g.now = func() time.Time { return now }
		return g
	}
	wantRefused := func(t *testing.T, err error, reason string, g *passwordGate) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("want ResourceExhausted (%s), got %v", reason, err)
		}
		if n := metricValue(t, g.m.pwRefused.WithLabelValues(reason)); n < 1 {
			t.Fatalf("no %s refusal counted", reason)
		}
	}
	t.Run("per peer rate", func(t *testing.T) {
		g := gate(PasswordLimits{Concurrent: 4, PeerRate: 1, PeerBurst: 2})
		for i := 0; i < 2; i++ {
			done, err := g.admit(ctx, "10.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			done()
		}
		_, err := g.admit(ctx, "10.0.0.1")
		wantRefused(t, err, "peer_rate", g)
		done, err := g.admit(ctx, "10.0.0.2") // another client is not affected
		if err != nil {
			t.Fatal(err)
		}
		done()
		now = now.Add(time.Second) // one token back
		done, err = g.admit(ctx, "10.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		done()
	})
	t.Run("global rate", func(t *testing.T) {
		g := gate(PasswordLimits{Concurrent: 4, Rate: 1, Burst: 3})
		for i := 0; i < 3; i++ {
			done, err := g.admit(ctx, "10.0.1."+string(rune('0'+i)))
			if err != nil {
				t.Fatal(err)
			}
			done()
		}
		_, err := g.admit(ctx, "10.0.1.9")
		wantRefused(t, err, "global_rate", g)
	})
	t.Run("concurrency and queue", func(t *testing.T) {
		g := gate(PasswordLimits{Concurrent: 1, Queue: 1, QueueWait: 2 * time.Second})
		done1, err := g.admit(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var err2 error
		var done2 func()
		wg.Add(1)
		go func() { defer wg.Done(); done2, err2 = g.admit(ctx, "b") }() // queued
		deadline := time.Now().Add(2 * time.Second)
		for g.waiting.Load() != 1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		_, err = g.admit(ctx, "c") // the queue is full
		wantRefused(t, err, "queue_full", g)
		if n := metricValue(t, g.m.pwInFlight); n != 1 {
			t.Fatalf("%v checks running, want 1", n)
		}
		done1()
		wg.Wait()
		if err2 != nil {
			t.Fatalf("the queued check: %v", err2)
		}
		done2()
	})
	t.Run("queue timeout and refusal delay", func(t *testing.T) {
		g := gate(PasswordLimits{Concurrent: 1, Queue: 4, QueueWait: 100 * time.Millisecond, RefusalDelay: 200 * time.Millisecond})
		done, err := g.admit(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		defer done()
		start := time.Now()
		_, err = g.admit(ctx, "b")
		wantRefused(t, err, "queue_timeout", g)
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Fatalf("refused after %v, want the queue wait and the refusal delay", d)
		}
	})
}

// basicCtx is a context carrying basic-auth credentials.
func basicCtx(user, pass string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization",
		"Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
}

// handshake runs a basic-auth handshake and returns its error.
func handshake(ctx context.Context, c flight.Client) error {
	stream, err := c.Handshake(ctx)
	if err != nil {
		return err
	}
	_ = stream.CloseSend()
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// TestLoginCache: a second handshake with the same user and password skips
// bcrypt and the gate; a wrong password is never cached; a reload forgets
// the cache; so does the TTL.
func TestLoginCache(t *testing.T) {
	f := testAuth(t)
	s := startAuth(t, f, WithPasswordLimits(PasswordLimits{Concurrent: 1, PeerRate: 1, PeerBurst: 2, RefusalDelay: time.Millisecond}))
	checks := func() float64 { return metricValue(t, s.srv.metrics.pwChecks) }
	if err := handshake(basicCtx("alice", "s3cret"), s.c); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ { // beyond the peer's burst: answered from the cache
		if err := handshake(basicCtx("alice", "s3cret"), s.c); err != nil {
			t.Fatalf("cached login %d: %v", i, err)
		}
	}
	if n := checks(); n != 1 {
		t.Fatalf("%v bcrypt checks for 6 logins", n)
	}
	if n := metricValue(t, s.srv.metrics.pwCached); n != 5 {
		t.Fatalf("%v cache hits", n)
	}
	if err := handshake(basicCtx("alice", "wrong"), s.c); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong password: %v", err)
	}
	if err := handshake(basicCtx("alice", "wrong"), s.c); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("wrong password beyond the peer's burst: %v", err)
	}
	if err := s.a.Set(f); err != nil { // as SIGHUP does
		t.Fatal(err)
	}
	if s.a.cached("alice", "s3cret") {
		t.Fatal("the cache survived a reload")
	}
	a, err := NewAuthenticator(f, WithLoginCacheTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a.now = func() time.Time { return now }
	if _, _, err := a.Login("alice", "s3cret"); err != nil {
		t.Fatal(err)
	}
	if !a.cached("alice", "s3cret") || a.cached("alice", "other") || a.cached("bob", "s3cret") {
		t.Fatal("cache keyed wrongly")
	}
	now = now.Add(61 * time.Second)
	if a.cached("alice", "s3cret") {
		t.Fatal("the cache outlived its TTL")
	}
}

// TestHandshakeFloodSparesTokens: while handshakes with wrong passwords
// flood the server, at most Concurrent bcrypt checks run, the flood is
// refused ResourceExhausted, and a client with a bearer token is served.
func TestHandshakeFloodSparesTokens(t *testing.T) {
	s := startAuth(t, testAuth(t), WithPasswordLimits(PasswordLimits{
		Concurrent: 1, Queue: 2, QueueWait: 50 * time.Millisecond, Rate: 20, Burst: 5, PeerRate: 20, PeerBurst: 5, RefusalDelay: 20 * time.Millisecond,
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var mu sync.Mutex
	got := map[codes.Code]int{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := handshake(metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("alice:nope"))), s.c)
				mu.Lock()
				got[status.Code(err)]++
				mu.Unlock()
			}
		}()
	}
	for ctx.Err() == nil {
		if err := getErr(bearer("tok-read-all"), s.c, "nothing"); status.Code(err) != codes.NotFound {
			t.Errorf("token client during the flood: %v", err)
			break
		}
		if n := metricValue(t, s.srv.metrics.pwInFlight); n > 1 {
			t.Errorf("%v bcrypt checks at once", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	if got[codes.ResourceExhausted] == 0 || got[codes.Unauthenticated] == 0 {
		t.Fatalf("flood outcomes %v", got)
	}
	if n := metricValue(t, s.srv.metrics.pwChecks); n > 5+2*20+2 {
		t.Fatalf("%v bcrypt checks in 2 s, over the rate", n)
	}
}

// TestSessionEndsWithPassword (red team F20): a new password in the auth
// file ends the sessions its old one opened, and a password longer than
// bcrypt reads (72 bytes) is refused rather than matched by its prefix.
func TestSessionEndsWithPassword(t *testing.T) {
	mk := func(pw string) *AuthFile {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		return &AuthFile{Users: []AuthUser{{Name: "alice", PasswordBcrypt: string(h), Role: "write"}}}
	}
	long := strings.Repeat("A", 72)
	a, err := NewAuthenticator(mk(long))
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := a.Login("alice", long)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Login("alice", long+"-anything"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("73+ byte password sharing the first 72: %v", err)
	}
	if _, err := a.Token(tok); err != nil {
		t.Fatalf("session before the change: %v", err)
	}
	if err := a.Set(mk(long)); err != nil { // the same user, a new hash of the same password
		t.Fatal(err)
	}
	if _, err := a.Token(tok); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("session after a new password hash: %v", err)
	}
	tok2, _, err := a.Login("alice", long)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Token(tok2); err != nil {
		t.Fatalf("a new session: %v", err)
	}
}

// TestSessionsPerUserBounded: handshakes in a loop (cheap once the login
// cache holds the password) keep at most MaxSessionsPerUser tokens of a
// user; the oldest end first, the newest stay valid, and other users'
// sessions are untouched.
func TestSessionsPerUserBounded(t *testing.T) {
	var users []AuthUser
	for _, name := range []string{"alice", "bob"} {
		h, err := bcrypt.GenerateFromPassword([]byte("pw-"+name), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, AuthUser{Name: name, PasswordBcrypt: string(h), Role: "read"})
	}
	a, err := NewAuthenticator(&AuthFile{Users: users})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1_700_000_000, 0)
	a.now = func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	bobTok, _, err := a.Login("bob", "pw-bob")
	if err != nil {
		t.Fatal(err)
	}
	var toks []string
	for range MaxSessionsPerUser + 100 {
		tok, _, err := a.Login("alice", "pw-alice")
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	a.mu.Lock()
	n := len(a.sessions)
	a.mu.Unlock()
	if n != MaxSessionsPerUser+1 {
		t.Errorf("%d sessions kept, want %d", n, MaxSessionsPerUser+1)
	}
	if _, err := a.Token(toks[0]); status.Code(err) != codes.Unauthenticated {
		t.Errorf("the oldest session: %v, want Unauthenticated", err)
	}
	for _, tok := range []string{toks[len(toks)-1], toks[len(toks)-MaxSessionsPerUser], bobTok} {
		if _, err := a.Token(tok); err != nil {
			t.Errorf("a session within the bound: %v", err)
		}
	}
}

// TestPrefixThatNamesNothing: a prefix of "/" or blanks (a template whose
// variable was empty) is refused when the auth file is loaded instead of
// granting every profile; "" and no prefixes keep meaning every profile,
// and a prefix with stray slashes still names its keys.
func TestPrefixThatNamesNothing(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		prefixes     []string
		ok           bool
		unrestricted bool
	}{
		{nil, true, true},
		{[]string{}, true, true},
		{[]string{""}, true, true},
		{[]string{"sales/"}, true, false},
		{[]string{"/sales"}, true, false},
		{[]string{"/"}, false, false},
		{[]string{"//"}, false, false},
		{[]string{" "}, false, false},
		{[]string{"sales", "/"}, false, false},
	}
	for _, tt := range tests {
		for _, kind := range []string{"user", "token"} {
			f := &AuthFile{}
			if kind == "user" {
				f.Users = []AuthUser{{Name: "u", PasswordBcrypt: string(h), Role: "read", Prefixes: tt.prefixes}}
			} else {
				f.Tokens = []AuthToken{{SHA256: TokenSHA256("tok"), Identity: "t", Role: "read", Prefixes: tt.prefixes}}
			}
			a, err := NewAuthenticator(f)
			if (err == nil) != tt.ok {
				t.Errorf("%s prefixes %q: %v, want ok=%v", kind, tt.prefixes, err, tt.ok)
				continue
			}
			if err != nil {
				if !strings.Contains(err.Error(), "names no profile key") {
					t.Errorf("%s prefixes %q: unclear error %v", kind, tt.prefixes, err)
				}
				continue
			}
			var id *Identity
			if kind == "user" {
				_, id, err = a.Login("u", "pw")
			} else {
				id, err = a.Token("tok")
			}
			if err != nil {
				t.Fatal(err)
			}
			if id.Unrestricted() != tt.unrestricted {
				t.Errorf("%s prefixes %q: unrestricted %v, want %v", kind, tt.prefixes, id.Unrestricted(), tt.unrestricted)
			}
		}
	}
}
