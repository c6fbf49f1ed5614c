package flightserver

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/mem"

	"github.com/quiverdb/quiver/internal/flightwire"
	"github.com/quiverdb/quiver/internal/poison"
)

// A DoPut's batches are received into buffers that are used again. Each
// received message is gathered from gRPC's frames into one buffer, which
// its batch's columns alias (flightwire.Unmarshal). That buffer was a new
// allocation of the message's size every time (37 MiB for the benchmark's
// batches): a gigabyte put allocated a gigabyte the collector had to find
// and the runtime to clear, on pages it had often just given back to the
// system (docs/benchmarks.md). Now the buffer goes back to recvPool when
// the last column of its batch is released (the body's memory.Buffer is
// counted, and its allocator is the recvBuf), and the next message of
// about the same size is gathered into it.

// recvPooledMin is the smallest message received into a pooled buffer;
// smaller ones are gathered as before (flightwire.Codec).
const recvPooledMin = 1 << 20

// recvPooledMax is the largest.
const recvPooledMax = 256 << 20

// recvPool holds the buffers given back, for the next messages.
var recvPool = &recvFree{}

// recvTaken and recvGiven count the buffers handed out and given back
// (tests: every one taken comes back).
var recvTaken, recvGiven atomic.Int64

// recvFree is a short list of free buffers, dropped after recvFreeIdle
// without use: a collector's pool (sync.Pool) drops what it holds within
// two collections, and a put under the memory limit collects more often
// than it receives a large batch.
type recvFree struct {
	mu    sync.Mutex
	bufs  []*recvBuf // most recently freed last
	bytes int        // their capacity
	timer *time.Timer
}

// recvFreeMax is the most buffers recvFree keeps, recvFreeBytes the most
// bytes (outside the in-flight budget, which counts messages received),
// and recvFreeIdle how long.
const (
	recvFreeMax   = 4
	recvFreeBytes = 128 << 20
	recvFreeIdle  = 2 * time.Second
)

// get returns a buffer of n bytes, its content undefined: the smallest
// free one that holds n bytes without wasting more than half of it, else
// a new one.
func (p *recvFree) get(n int) *recvBuf {
	recvTaken.Add(1)
	p.mu.Lock()
	best := -1
	for i, rb := range p.bufs {
		if c := cap(rb.b); c >= n && c <= 2*n && (best < 0 || c < cap(p.bufs[best].b)) {
			best = i
		}
	}
	if best >= 0 {
		rb := p.bufs[best]
		p.bufs = append(p.bufs[:best], p.bufs[best+1:]...)
		p.bytes -= cap(rb.b)
		p.mu.Unlock()
		rb.once.Store(false)
		rb.b = rb.b[:n]
		return rb
	}
	p.mu.Unlock()
	return &recvBuf{b: make([]byte, n, (n+1<<20-1)&^(1<<20-1))}
}

// put keeps rb for a later get (the oldest dropped past recvFreeMax or
// recvFreeBytes).
func (p *recvFree) put(rb *recvBuf) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bufs = append(p.bufs, rb)
	p.bytes += cap(rb.b)
	for len(p.bufs) > recvFreeMax || p.bytes > recvFreeBytes {
		p.bytes -= cap(p.bufs[0].b)
		p.bufs[0] = nil
		p.bufs = p.bufs[1:]
	}
	if p.timer == nil {
		p.timer = time.AfterFunc(recvFreeIdle, p.drop)
	} else {
		p.timer.Reset(recvFreeIdle)
	}
}

// drop lets the collector have the free buffers.
func (p *recvFree) drop() {
	p.mu.Lock()
	p.bufs, p.bytes = nil, 0
	p.mu.Unlock()
}

// pooledFor holds the FlightData messages a DoPut is receiving into
// (recvErrStream.recv registers each before its receive and takes it out
// after, whatever the receive returned): the codec receives a large one
// into a pooled buffer, and records the buffer here. Interceptors still
// see the *flight.FlightData they always saw; any other FlightData is
// received as before.
var pooledFor sync.Map // *flight.FlightData → *recvBuf (nil: none yet)

// recvBuf is a pooled buffer, and the memory.Allocator of the body that
// aliases it: Free (the body's last release) puts it back in the pool.
type recvBuf struct {
	b    []byte
	once atomic.Bool
}

// put gives rb back to the pool (once; later calls do nothing).
func (rb *recvBuf) put() {
	if rb.once.Swap(true) {
		return
	}
	recvGiven.Add(1)
	if poison.On {
		poison.Fill(rb.b)
	}
	recvPool.put(rb)
}

// Allocate implements memory.Allocator (a body never allocates).
func (rb *recvBuf) Allocate(size int) []byte { return make([]byte, size) }

// Reallocate implements memory.Allocator.
func (rb *recvBuf) Reallocate(size int, b []byte) []byte {
	nb := make([]byte, size)
	copy(nb, b)
	return nb
}

// Free implements memory.Allocator: the body aliasing rb is released.
func (rb *recvBuf) Free([]byte) { rb.put() }

// unmarshalPooled decodes data into fd, gathered into a pooled buffer, if
// fd is a DoPut's (pooledFor); it reports whether it was.
func unmarshalPooled(data mem.BufferSlice, fd *flight.FlightData) (bool, error) {
	if _, ok := pooledFor.Load(fd); !ok {
		return false, nil
	}
	rb := recvPool.get(data.Len())
	data.CopyTo(rb.b)
	if err := flightwire.Unmarshal(rb.b, fd); err != nil {
		rb.put()
		return true, err
	}
	pooledFor.Store(fd, rb)
	return true, nil
}

// recvMessages reads a DoPut's IPC messages from its stream (as arrow-go's
// Flight reader does), each body a memory.Buffer whose release gives its
// pooled buffer back. A message is valid until the next one is read (the
// IPC reader's batches retain the slices of its body they use).
type recvMessages struct {
	rs    *recvErrStream
	msg   *ipc.Message
	descr *flight.FlightDescriptor
	refs  atomic.Int64
}

// Message implements ipc.MessageReader.
func (m *recvMessages) Message() (*ipc.Message, error) {
	m.releaseMsg()
	fd, rb, err := m.rs.recv()
	if err != nil {
		return nil, err
	}
	if fd.FlightDescriptor != nil {
		m.descr = fd.FlightDescriptor
	}
	body := memory.NewBufferBytes(fd.DataBody)
	if rb != nil {
		body = memory.NewBufferWithAllocator(fd.DataBody, rb)
	}
	meta := memory.NewBufferBytes(fd.DataHeader)
	m.msg = ipc.NewMessage(meta, body) // (retains both)
	meta.Release()
	body.Release()
	return m.msg, nil
}

func (m *recvMessages) releaseMsg() {
	if m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
}

// Retain implements ipc.MessageReader.
func (m *recvMessages) Retain() { m.refs.Add(1) }

// Release implements ipc.MessageReader.
func (m *recvMessages) Release() {
	if m.refs.Add(-1) == 0 {
		m.releaseMsg()
	}
}

// putReader is a DoPut's record reader (arrow-go's flight.Reader, over
// recvMessages).
type putReader struct {
	*ipc.Reader
	msgs *recvMessages
}

// newPutReader reads rs's schema and returns its reader.
func newPutReader(rs *recvErrStream, opts ...ipc.Option) (*putReader, error) {
	m := &recvMessages{rs: rs}
	m.refs.Add(1) // (the IPC reader's, released with it, or on its error)
	r, err := ipc.NewReaderFromMessageReader(m, opts...)
	if err != nil {
		return nil, err
	}
	return &putReader{Reader: r, msgs: m}, nil
}

// LatestFlightDescriptor is the descriptor of the last message that had
// one (the first's).
func (r *putReader) LatestFlightDescriptor() *flight.FlightDescriptor { return r.msgs.descr }

// Release releases the reader, and with it its messages.
func (r *putReader) Release() { r.Reader.Release() }
