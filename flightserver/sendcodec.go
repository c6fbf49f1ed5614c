package flightserver

import (
	"errors"
	"runtime"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// sendCodec is the server's gRPC codec: protobuf for every message but the
// Flight data messages DoGet sends as a *dataMessage, which it encodes
// without copying their body. The standard path copies a batch twice
// before gRPC writes it (into one contiguous FlightData body, then into
// the marshalled protobuf); here the protobuf framing is written in front
// of the batch's own buffers (or a message read from a cache entry), and gRPC
// copies them once, into its frames. What it receives it decodes as
// flightCodec does (DoPut bodies aliased, not copied).
type sendCodec struct{ proto encoding.CodecV2 }

func newSendCodec() sendCodec { return sendCodec{proto: newFlightCodec()} }

// Name is protobuf's: the wire format is the same.
func (c sendCodec) Name() string { return c.proto.Name() }

func (c sendCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (c sendCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*dataMessage); ok {
		return m.marshal()
	}
	return c.proto.Marshal(v)
}

// FlightData's field numbers (Flight.proto).
const (
	fieldDataHeader = 2
	fieldDataBody   = 1000
)

// dataMessage is a FlightData message (a data header and a body in
// pieces) whose bytes stay valid until release is called. gRPC may write a
// message after SendMsg returned: release runs when gRPC frees the last
// piece it holds, or at once when no piece needs to be held.
type dataMessage struct {
	header  []byte
	body    [][]byte
	release func()
	// state: 0 pending, 1 taken by Marshal, 2 abandoned by the sender
	// (SendMsg returned without encoding it: a send that timed out may
	// still try later, and must then find nothing).
	state atomic.Int32
}

var errAbandoned = errors.New("flightserver: message abandoned before it was encoded")

func (m *dataMessage) marshal() (mem.BufferSlice, error) {
	if !m.state.CompareAndSwap(0, 1) {
		return nil, errAbandoned
	}
	n := 0
	for _, b := range m.body {
		n += len(b)
	}
	pre := make([]byte, 0, len(m.header)+24)
	pre = protowire.AppendTag(pre, fieldDataHeader, protowire.BytesType)
	pre = protowire.AppendVarint(pre, uint64(len(m.header)))
	pre = append(pre, m.header...)
	if n > 0 {
		pre = protowire.AppendTag(pre, fieldDataBody, protowire.BytesType)
		pre = protowire.AppendVarint(pre, uint64(n))
	}
	out := mem.BufferSlice{mem.SliceBuffer(pre)}
	rel := &releaser{fn: m.release}
	rel.n.Store(1) // marshal's own hold, dropped below
	for _, b := range m.body {
		switch {
		case len(b) == 0:
		case mem.IsBelowBufferPoolingThreshold(cap(b)):
			// gRPC would not tell when it is done with a small buffer:
			// copy it (padding, a short column).
			out = append(out, mem.SliceBuffer(append([]byte(nil), b...)))
		default:
			p := &[]byte{}
			*p = b
			rel.n.Add(1)
			pc := &piece{rel: rel}
			// gRPC frees a piece when it has written it, or drops it
			// unfreed when the connection dies with the piece still queued
			// (a stalled client that went away): then the garbage
			// collector finds it unreachable and the cleanup releases it.
			// Either way the bytes are released only once nothing can
			// read them.
			runtime.AddCleanup(p, (*piece).dropped, pc)
			out = append(out, mem.NewBuffer(p, pc))
		}
	}
	rel.Put(nil)
	return out, nil
}

// abandon releases a message SendMsg returned without encoding (true), or
// reports that gRPC owns it (false).
func (m *dataMessage) abandon() bool {
	if m.state.CompareAndSwap(0, 2) {
		m.release()
		return true
	}
	return false
}

// releaser is the mem.BufferPool of a message's pieces: the last one gRPC
// frees releases the message.
type releaser struct {
	n  atomic.Int32
	fn func()
}

func (r *releaser) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

// piece is the mem.BufferPool of one piece of a message: freed by gRPC
// (Put) or found unreachable (dropped), whichever comes first, it drops
// its hold on the message once.
type piece struct {
	rel  *releaser
	done atomic.Bool
}

func (p *piece) Get(n int) *[]byte { return p.rel.Get(n) }

func (p *piece) Put(*[]byte) {
	if p.done.CompareAndSwap(false, true) {
		p.rel.Put(nil)
	}
}

func (p *piece) dropped() { p.Put(nil) }

func (r *releaser) Put(*[]byte) {
	if r.n.Add(-1) == 0 {
		r.fn()
	}
}

// bodyPieces collects what ipc.Payload.SerializeBody writes — each buffer
// and its padding — without copying.
type bodyPieces [][]byte

func (p *bodyPieces) Write(b []byte) (int, error) {
	*p = append(*p, b)
	return len(b), nil
}

// payloadMessage makes a dataMessage of an IPC payload; release (if not
// nil) runs after the payload's own release.
func payloadMessage(pl *ipc.Payload, release func()) (*dataMessage, error) {
	meta := pl.Meta()
	var body bodyPieces
	if err := pl.SerializeBody(&body); err != nil {
		meta.Release()
		return nil, err
	}
	return &dataMessage{header: meta.Bytes(), body: body, release: func() {
		meta.Release()
		pl.Release()
		if release != nil {
			release()
		}
	}}, nil
}
