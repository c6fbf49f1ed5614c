package ipccache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Message is one record batch message of an entry, as its index row
// describes it.
type Message struct {
	// Rows in the batch.
	Rows                          int64
	off, metaLen, padded, bodyLen int64
	crc                           uint32
}

// Entry is an open cache entry. Its messages are read from the file into
// memory of their own (never mapped) and checked against their checksum
// on every read: what an entry yields stays valid after the entry is
// released, and a file changed or truncated under a reader fails that
// read with an error (ErrCorrupt) instead of handing on other bytes.
type Entry struct {
	refs atomic.Int32
	f    *os.File
	size int64
	p    *parsed
	c    *Cache
	it   *item
}

// Retain adds a reference.
func (e *Entry) Retain() { e.refs.Add(1) }

// Release drops a reference; the last one closes the entry's file.
func (e *Entry) Release() {
	if e.refs.Add(-1) == 0 {
		_ = e.f.Close()
	}
}

// Schema is the schema of the entry's batches.
func (e *Entry) Schema() *arrow.Schema { return e.p.schema }

// Rows is the total of the batches' rows.
func (e *Entry) Rows() int64 { return e.p.rows }

// Size is the entry's size in bytes.
func (e *Entry) Size() int64 { return e.size }

// NumBatches is the number of record batch messages.
func (e *Entry) NumBatches() int { return len(e.p.msgs) }

// BatchRows is the number of rows of message i (from the index: nothing
// is read).
func (e *Entry) BatchRows(i int) int64 { return e.p.msgs[i].Rows }

// Batch reads message i: its flatbuffer metadata (a Flight DataHeader) and
// body (a Flight DataBody), in one buffer of their own that the caller
// owns, checked against the message's checksum. A message that cannot be
// read whole or fails its check is an ErrCorrupt error, and the entry is
// dropped from the cache.
func (e *Entry) Batch(i int) (meta, body []byte, rows int64, err error) {
	m := e.p.msgs[i]
	buf := make([]byte, 8+m.padded+m.bodyLen)
	if err := e.readMessage(i, buf); err != nil {
		return nil, nil, 0, err
	}
	return buf[8 : 8+m.metaLen], buf[8+m.padded:], m.Rows, nil
}

// BatchPooled is Batch into a pooled buffer: free returns it to its pool
// once nothing reads meta and body any more (nothing may alias them past
// that, so they are for sending as they are, not for decoding).
func (e *Entry) BatchPooled(i int) (meta, body []byte, rows int64, free func(), err error) {
	m := e.p.msgs[i]
	buf := getBuf(int(8 + m.padded + m.bodyLen))
	if err := e.readMessage(i, buf); err != nil {
		putBuf(buf)
		return nil, nil, 0, nil, err
	}
	return buf[8 : 8+m.metaLen], buf[8+m.padded:], m.Rows, func() { putBuf(buf) }, nil
}

// readMessage reads message i, framing included, into buf (its exact
// size) and checks it against its checksum.
func (e *Entry) readMessage(i int, buf []byte) error {
	m := e.p.msgs[i]
	if _, err := e.f.ReadAt(buf, m.off); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // no server path in the message
		}
		return e.corrupt(fmt.Errorf("%w: message %d: %v", ErrCorrupt, i, err))
	}
	if crc32.Checksum(buf, castagnoli) != m.crc ||
		binary.LittleEndian.Uint32(buf) != 0xFFFFFFFF || int64(binary.LittleEndian.Uint32(buf[4:])) != m.padded {
		return e.corrupt(fmt.Errorf("%w: message %d: checksum mismatch", ErrCorrupt, i))
	}
	return nil
}

// corrupt drops the entry from the cache (a later read decodes the file
// and fills it again) and returns err.
func (e *Entry) corrupt(err error) error {
	if e.c != nil {
		e.c.drop(e.it, true)
	}
	return err
}

// Reader returns a reader of the entry's batches. Their buffers are the
// messages read (Batch), not the allocator's: they stay valid after the
// entry is released. The reader retains the entry until it is released.
func (e *Entry) Reader(mem memory.Allocator) (*ipc.Reader, error) {
	e.Retain()
	mr := &msgReader{p: e.p, e: e}
	mr.refs.Store(1)
	r, err := ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(mem), ipc.WithSchema(e.p.schema))
	if err != nil {
		mr.Release()
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return r, nil
}

// ReadBatch reads and decodes message i (its buffers are the message
// read, as with Reader). The caller releases it.
func (e *Entry) ReadBatch(i int, mem memory.Allocator) (arrow.RecordBatch, error) {
	meta, body, _, err := e.Batch(i)
	if err != nil {
		return nil, err
	}
	return e.Decode(meta, body, mem)
}

// Decode decodes a record batch message of the entry (meta and body as
// Batch returns them) without copying: the batch's buffers are body. The
// caller releases it.
func (e *Entry) Decode(meta, body []byte, mem memory.Allocator) (arrow.RecordBatch, error) {
	mr := &msgReader{p: e.p, one: [][2][]byte{{meta, body}}}
	mr.refs.Store(1)
	r, err := ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(mem), ipc.WithSchema(e.p.schema))
	if err != nil {
		mr.Release()
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	defer r.Release()
	if !r.Next() {
		if r.Err() != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, r.Err())
		}
		return nil, fmt.Errorf("%w: the message is not a batch", ErrCorrupt)
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec, nil
}

// msgReader yields an entry's schema message, then its batches (e set),
// or the messages in one.
type msgReader struct {
	refs atomic.Int64
	p    *parsed
	e    *Entry
	one  [][2][]byte
	next int
	done bool
	cur  *ipc.Message
}

func (r *msgReader) Retain() { r.refs.Add(1) }

func (r *msgReader) Release() {
	if r.refs.Add(-1) == 0 {
		r.clear()
		if r.e != nil {
			r.e.Release()
			r.e = nil
		}
	}
}

func (r *msgReader) clear() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}

func (r *msgReader) Message() (*ipc.Message, error) {
	r.clear()
	if !r.done {
		r.done = true
		r.cur = ipc.NewMessage(memory.NewBufferBytes(r.p.schemaMeta), memory.NewBufferBytes(nil))
		return r.cur, nil
	}
	var meta, body []byte
	switch {
	case r.e == nil && r.next < len(r.one):
		meta, body = r.one[r.next][0], r.one[r.next][1]
	case r.e != nil && r.next < len(r.p.msgs):
		var err error
		meta, body, _, err = r.e.Batch(r.next)
		if err != nil {
			return nil, err
		}
	default:
		return nil, io.EOF
	}
	r.next++
	r.cur = ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(body))
	return r.cur, nil
}

// parseSchema decodes an IPC schema message's flatbuffer.
func parseSchema(meta []byte) (*arrow.Schema, error) {
	var framed []byte
	framed = binary.LittleEndian.AppendUint32(framed, 0xFFFFFFFF)
	framed = binary.LittleEndian.AppendUint32(framed, uint32(len(meta)))
	framed = append(framed, meta...)
	framed = binary.LittleEndian.AppendUint64(framed, 0xFFFFFFFF) // end of stream
	r, err := ipc.NewReader(bytes.NewReader(framed))
	if err != nil {
		return nil, err
	}
	defer r.Release()
	if r.Next() {
		return nil, errors.New("a batch follows the schema")
	}
	return r.Schema(), nil
}
