package flightserver

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PasswordLimits bound the work basic-auth handshakes can make the server
// do: a bcrypt check costs tens of milliseconds of CPU, and whoever can
// reach the port can ask for one without credentials. Bearer tokens (a
// SHA-256 lookup) and handshakes answered from the login cache are not
// limited.
type PasswordLimits struct {
	// Concurrent is how many bcrypt checks run at once (at least 1).
	Concurrent int
	// Queue is how many handshakes may wait for a check slot; more are
	// refused at once (after the refusal delay).
	Queue int
	// QueueWait is how long a handshake waits for a slot before it is
	// refused.
	QueueWait time.Duration
	// Rate and Burst are the server-wide token bucket of checks: Rate
	// checks per second on average, Burst at once. Rate <= 0: no limit.
	Rate  float64
	Burst int
	// PeerRate and PeerBurst are the token bucket of each client IP.
	// PeerRate <= 0: no limit.
	PeerRate  float64
	PeerBurst int
	// RefusalDelay is how long a refused handshake waits before it gets
	// its answer, so that a flooding client cannot loop faster than that
	// (each waiting handshake costs a goroutine, no CPU).
	RefusalDelay time.Duration
}

// DefaultPasswordLimits: 2 checks at once with 8 waiting up to 2 s, 10
// checks/s server-wide (burst 20), 2 checks/s per client IP (burst 5),
// refusals answered after 1 s. A client that logs in once and reuses its
// session token (the normal case) never meets them.
var DefaultPasswordLimits = PasswordLimits{
	Concurrent:   2,
	Queue:        8,
	QueueWait:    2 * time.Second,
	Rate:         10,
	Burst:        20,
	PeerRate:     2,
	PeerBurst:    5,
	RefusalDelay: time.Second,
}

// maxPeerBuckets caps the per-IP buckets kept; past it idle buckets are
// dropped, and if none is idle new peers share the global bucket only.
const maxPeerBuckets = 1 << 16

// tokenBucket is a token bucket refilled continuously.
type tokenBucket struct {
	tokens float64
	last   time.Time
}

func (b *tokenBucket) take(now time.Time, rate float64, burst int) bool {
	if b.last.IsZero() {
		b.tokens = float64(burst)
	} else {
		b.tokens = min(float64(burst), b.tokens+now.Sub(b.last).Seconds()*rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}

// full reports whether the bucket would be full now (so forgetting it
// changes nothing).
func (b *tokenBucket) full(now time.Time, rate float64, burst int) bool {
	return b.tokens+now.Sub(b.last).Seconds()*rate >= float64(burst)
}

// passwordGate admits basic-auth handshakes to a bcrypt check.
type passwordGate struct {
	l       PasswordLimits
	m       *metrics
	now     func() time.Time
	slots   chan struct{}
	waiting atomic.Int64

	mu     sync.Mutex
	global tokenBucket
	peers  map[string]*tokenBucket
}

func newPasswordGate(l PasswordLimits, m *metrics) *passwordGate {
	l.Concurrent = max(l.Concurrent, 1)
	l.Queue = max(l.Queue, 0)
	if l.Burst < 1 {
		l.Burst = 1
	}
	if l.PeerBurst < 1 {
		l.PeerBurst = 1
	}
	return &passwordGate{l: l, m: m, now: time.Now, slots: make(chan struct{}, l.Concurrent), peers: map[string]*tokenBucket{}}
}

// admit waits for the right to run one password check for a client at
// host (an IP). It returns a func that ends the check, or a
// ResourceExhausted error after the refusal delay.
func (g *passwordGate) admit(ctx context.Context, host string) (func(), error) {
	if reason := g.takeTokens(host); reason != "" {
		return nil, g.refuse(ctx, reason, "too many login attempts; retry later")
	}
	select {
	case g.slots <- struct{}{}:
		return g.started(), nil
	default:
	}
	if g.waiting.Add(1) > int64(g.l.Queue) {
		g.waiting.Add(-1)
		return nil, g.refuse(ctx, "queue_full", "too many logins in progress; retry later")
	}
	defer g.waiting.Add(-1)
	t := time.NewTimer(g.l.QueueWait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return g.started(), nil
	case <-t.C:
		return nil, g.refuse(ctx, "queue_timeout", "too many logins in progress; retry later")
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

func (g *passwordGate) started() func() {
	g.m.pwInFlight.Inc()
	g.m.pwChecks.Inc()
	return func() {
		g.m.pwInFlight.Dec()
		<-g.slots
	}
}

// takeTokens takes a token from the peer's bucket and the global one; it
// names the bucket that had none ("" when both had one).
func (g *passwordGate) takeTokens(host string) string {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.l.PeerRate > 0 {
		b := g.peers[host]
		if b == nil {
			if len(g.peers) >= maxPeerBuckets {
				for h, pb := range g.peers {
					if pb.full(now, g.l.PeerRate, g.l.PeerBurst) {
						delete(g.peers, h)
					}
				}
			}
			if len(g.peers) < maxPeerBuckets {
				b = &tokenBucket{}
				g.peers[host] = b
			}
		}
		if b != nil && !b.take(now, g.l.PeerRate, g.l.PeerBurst) {
			return "peer_rate"
		}
	}
	if g.l.Rate > 0 && !g.global.take(now, g.l.Rate, g.l.Burst) {
		return "global_rate"
	}
	return ""
}

// refuse counts a refusal and answers it after the refusal delay.
func (g *passwordGate) refuse(ctx context.Context, reason, msg string) error {
	g.m.pwRefused.WithLabelValues(reason).Inc()
	if g.l.RefusalDelay > 0 {
		t := time.NewTimer(g.l.RefusalDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return status.Error(codes.ResourceExhausted, "basic auth: "+msg)
}
