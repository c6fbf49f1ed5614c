package flightserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Defaults of the inbound memory limits; each has an Option.
const (
	// DefaultMaxInflightBytes is the server-wide budget of inbound data
	// message bytes (DoPut, DoExchange): every RecvMsg reserves
	// the largest message it may receive (--max-recv-msg-size) before it
	// starts, and keeps the size of what it received until the stream's
	// next RecvMsg or its end. A RecvMsg whose connection has delivered no
	// byte since it started gives the reservation back after
	// defaultDormantAfter, and takes it again before the connection's next
	// bytes reach grpc (recvConn), so a put pausing between batches holds
	// nothing while it pauses; what the budget bounds is the messages that
	// may be arriving, plus the messages the handlers hold. Decompressed
	// DoPut buffers are charged to it too. The request messages of the
	// other RPCs have a pool of their own (requestPoolMessages), so slow
	// puts cannot hold up reads.
	DefaultMaxInflightBytes = 512 << 20
	// DefaultInflightWait is how long a receive waits for room in the
	// budget before the RPC fails with ResourceExhausted.
	DefaultInflightWait = 30 * time.Second
	// streamWindow is the static HTTP/2 flow-control window of a stream:
	// what a client may have sent on a stream that no RecvMsg is reading
	// (the dynamic window of grpc-go grows to 16 MiB per stream). A
	// RecvMsg in progress opens the window to the whole message, which is
	// what its reservation covers.
	streamWindow = 256 << 10
	// requestPoolMessages is how many largest messages the request pool
	// holds: the request of every RPC that is not a data stream (DoGet's
	// ticket, GetFlightInfo's descriptor, an action) reserves one while it
	// is read. Clients send the request with the call, so a reservation
	// lasts microseconds, or at most requestTimeout for a client that
	// stalls.
	requestPoolMessages = 4
	// connWindow is the static connection window. grpc-go acknowledges
	// connection-level data as it arrives, so it limits bytes on the wire,
	// not bytes held.
	connWindow = 16 << 20
	// writeBuffer is how much a connection's writer gathers before it
	// writes to the socket (grpc-go's default is 32 KiB). A DoGet sends
	// megabytes: one write per 32 KiB cost a wakeup of the reader each,
	// and 1 MiB made full reads 9-17% faster in wall time, side by side
	// over loopback (docs/benchmarks.md). The buffer is shared: taken
	// from a pool for a flush and given back after, so an idle
	// connection holds none.
	writeBuffer = 1 << 20
)

// budget is the server-wide budget of inbound message bytes: a weighted
// semaphore (FIFO, so a large reservation is not starved by small ones).
type budget struct {
	pool     string // "data" or "request", the label of its metrics
	flag     string // what raises it, for the refusal message
	capacity int64
	sem      *semaphore.Weighted
	wait     time.Duration
	used     atomic.Int64
	m        *metrics
}

func newBudget(pool, flag string, capacity int64, wait time.Duration, m *metrics) *budget {
	if capacity <= 0 {
		return nil
	}
	return &budget{pool: pool, flag: flag, capacity: capacity, sem: semaphore.NewWeighted(capacity), wait: wait, m: m}
}

// acquire reserves n bytes, waiting up to the budget's wait time (or until
// ctx ends).
func (b *budget) acquire(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	n = min(n, b.capacity)
	if b.sem.TryAcquire(n) {
		b.add(n)
		return nil
	}
	b.m.inflightWaits.WithLabelValues(b.pool).Inc()
	wctx := ctx
	if b.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, b.wait)
		defer cancel()
	}
	if err := b.sem.Acquire(wctx, n); err != nil {
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
		b.m.inflightRefusals.WithLabelValues(b.pool).Inc()
		return status.Errorf(codes.ResourceExhausted,
			"server busy: inbound messages in flight fill the server's budget of %d bytes (%s) and none finished within %s; retry later",
			b.capacity, b.flag, b.wait)
	}
	b.add(n)
	return nil
}

func (b *budget) release(n int64) {
	if n <= 0 {
		return
	}
	b.add(-n)
	b.sem.Release(n)
}

func (b *budget) add(n int64) { b.m.inflight.WithLabelValues(b.pool).Set(float64(b.used.Add(n))) }

// inflightStream charges every RecvMsg of a stream to the budget. Before
// the call it reserves the largest message grpc may accept (grpc-go buffers
// the whole message before RecvMsg returns, and it opens the HTTP/2 window
// to the message's size as soon as its 5-byte length prefix arrived, so
// nothing smaller is a bound); after the call it keeps the size of what
// was received, which the handler holds as the current message (an IPC
// batch of a DoPut references the message body without copying), until
// the next RecvMsg or the end of the stream.
//
// A data stream on a connection Serve accepted (c) gives the reservation
// back while its client sends no data on it, and takes it again before
// any byte of its data reaches it: see recvConn.
type inflightStream struct {
	grpc.ServerStream
	b       *budget
	reserve int64
	c       *recvConn  // nil: the reservation is held for the whole receive
	mu      sync.Mutex // RecvMsg is not called concurrently, but done may race an abandoned call
	held    int64

	// Under c.mu: the receive's state (recvIdle, recvArmed, recvDormant),
	// how many bytes c had delivered when it started, how many DATA
	// payload bytes of its stream arrived since, the timer that makes it
	// dormant, and the stream's HTTP/2 id (0: unknown) once looked up.
	state    int
	from     uint64
	got      uint64
	timer    *time.Timer
	sid      uint32
	sidKnown bool
}

func (w *inflightStream) RecvMsg(m any) error {
	w.mu.Lock()
	w.b.release(w.held)
	w.held = 0
	w.mu.Unlock()
	ctx := w.Context()
	if w.c != nil {
		if err := w.c.begin(ctx, w); err != nil {
			return err
		}
	}
	if err := w.b.acquire(ctx, w.reserve); err != nil {
		if w.c != nil {
			w.c.finish(w)
		}
		return err
	}
	if w.c != nil {
		w.c.start(w)
	}
	err := w.ServerStream.RecvMsg(m)
	var n int64
	if err == nil {
		n = int64(msgSize(m))
	}
	keep := min(n, w.reserve)
	if w.c != nil && !w.c.finish(w) {
		// Dormant when it returned: no data of its stream arrived while
		// it was, so the message was already in memory (within the
		// stream window, and dormantSlack if it watched the whole
		// connection) when it went dormant. It is charged now.
		if keep > 0 {
			if aerr := w.b.acquire(ctx, keep); aerr != nil {
				return aerr
			}
		}
		w.mu.Lock()
		w.held = keep
		w.mu.Unlock()
		return err
	}
	w.mu.Lock()
	w.b.release(w.reserve - keep)
	w.held = keep
	w.mu.Unlock()
	return err
}

// done releases what the stream still holds.
func (w *inflightStream) done() {
	w.mu.Lock()
	w.b.release(w.held)
	w.held = 0
	w.mu.Unlock()
}

// msgSize is the encoded size of a received message.
func msgSize(m any) int {
	if pm, ok := m.(proto.Message); ok {
		return proto.Size(pm)
	}
	return 0
}

// streamInflight is the interceptor that charges every stream's receives
// to a budget: the data pool for the streams that carry data from the
// client (DoPut, DoExchange), the request pool for the messages of every
// other RPC (their one request; a handshake's few small messages). It runs after authentication, so a caller without
// credentials never gets a message read. Health checks never read their
// request (see healthService) and are not charged.
func (s *Server) streamInflight(srv any, ss grpc.ServerStream, si *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	b := s.reqBudget
	if clientStreams(si.FullMethod) {
		b = s.budget
	}
	if b == nil || isHealth(si.FullMethod) {
		return h(srv, ss)
	}
	w := &inflightStream{ServerStream: ss, b: b, reserve: min(int64(s.opts.maxRecv), b.capacity)}
	if b == s.budget {
		if p, ok := peer.FromContext(ss.Context()); ok {
			if a, ok := p.Addr.(*connAddr); ok {
				w.c = a.c
			}
		}
	}
	defer w.done()
	return h(srv, w)
}

// clientStreams reports whether a method's client sends a stream of data
// messages (the data pool's methods).
func clientStreams(method string) bool {
	switch method {
	case "/arrow.flight.protocol.FlightService/DoPut",
		"/arrow.flight.protocol.FlightService/DoExchange":
		return true
	}
	return false
}

// errDecodeBudget is the panic value of a budgetAllocator that ran out;
// the IPC reader recovers it into an error.
var errDecodeBudget = errors.New("decoded batch exceeds the server's in-flight budget")

// budgetAllocator charges the buffers the IPC reader allocates for a DoPut
// (decompressed bodies: a compressed buffer states its own uncompressed
// size, which could otherwise ask for terabytes) to the budget. An
// allocation larger than the whole budget panics at once with
// errDecodeBudget, which the IPC reader turns into an error, and the put
// fails with ResourceExhausted; one that finds no room waits for it as a
// receive does (other streams' reservations: red team round 17's j09,
// where 8 concurrent puts of small compressed batches were refused
// because the others' pending receives held the budget), and past the
// budget's wait panics with the busy error. close returns what is still
// charged when the put ends: arrow-go leaks buffers on some error paths
// (the garbage collector frees them), and a leaked charge would shrink the
// budget for good.
type budgetAllocator struct {
	memory.Allocator
	b        *budget
	ctx      context.Context // the put's, which a wait for room ends with
	exceeded atomic.Bool
	busy     atomic.Pointer[error] // why a wait for room failed

	mu          sync.Mutex
	outstanding int64
	closed      bool
}

func (a *budgetAllocator) charge(n int) {
	if int64(n) > a.b.capacity {
		a.exceeded.Store(true)
		panic(fmt.Errorf("%w (%d more bytes)", errDecodeBudget, n))
	}
	// Waited for without the lock: the put's own buffers being freed
	// (uncharge) may be what makes room.
	if err := a.b.acquire(a.ctx, int64(n)); err != nil {
		a.busy.Store(&err)
		panic(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		a.b.release(int64(n))
		return
	}
	a.outstanding += int64(n)
}

func (a *budgetAllocator) uncharge(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.outstanding -= int64(n)
	a.b.release(int64(n))
}

// close releases what the put's buffers still hold of the budget.
func (a *budgetAllocator) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		a.b.release(a.outstanding)
		a.outstanding = 0
		a.closed = true
	}
}

// errNegativeSize is the panic value of an allocation of a negative size
// (a compressed buffer can claim one); the IPC reader recovers it.
var errNegativeSize = errors.New("allocation of a negative size")

// Allocate implements memory.Allocator.
func (a *budgetAllocator) Allocate(size int) []byte {
	if size < 0 {
		panic(errNegativeSize)
	}
	a.charge(size)
	return a.Allocator.Allocate(size)
}

// Reallocate implements memory.Allocator.
func (a *budgetAllocator) Reallocate(size int, b []byte) []byte {
	if size < 0 {
		panic(errNegativeSize)
	}
	if d := size - len(b); d > 0 {
		a.charge(d)
	} else {
		a.uncharge(-d)
	}
	return a.Allocator.Reallocate(size, b)
}

// Free implements memory.Allocator.
func (a *budgetAllocator) Free(b []byte) {
	a.uncharge(len(b))
	a.Allocator.Free(b)
}
