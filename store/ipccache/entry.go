package ipccache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sys/unix"
)

// Message is one record batch message of an entry.
type Message struct {
	// Rows in the batch.
	Rows                               int64
	metaOff, metaLen, bodyOff, bodyLen int64
}

// Entry is a mapped cache entry. Everything read from it — message bytes,
// batches — is backed by the mapping and valid until the last Release.
type Entry struct {
	refs atomic.Int32
	data []byte
	p    *parsed
}

// Retain adds a reference.
func (e *Entry) Retain() { e.refs.Add(1) }

// Release drops a reference; the last one unmaps the entry.
func (e *Entry) Release() {
	if e.refs.Add(-1) == 0 {
		_ = unix.Munmap(e.data)
		e.data = nil
	}
}

// Schema is the schema of the entry's batches.
func (e *Entry) Schema() *arrow.Schema { return e.p.schema }

// Rows is the total of the batches' rows.
func (e *Entry) Rows() int64 { return e.p.rows }

// Size is the entry's size in bytes.
func (e *Entry) Size() int64 { return int64(len(e.data)) }

// NumBatches is the number of record batch messages.
func (e *Entry) NumBatches() int { return len(e.p.msgs) }

// Batch returns message i: its flatbuffer metadata (a Flight DataHeader)
// and body (a Flight DataBody), as they lie in the mapping.
func (e *Entry) Batch(i int) (meta, body []byte, rows int64) {
	m := e.p.msgs[i]
	return e.data[m.metaOff : m.metaOff+m.metaLen], e.data[m.bodyOff : m.bodyOff+m.bodyLen], m.Rows
}

// Done tells the kernel that message i has been read: its pages leave
// the process's resident set (they stay in the page cache). Batches
// decoded from message i must not be used afterwards.
func (e *Entry) Done(i int) {
	m := e.p.msgs[i]
	const page = 4096
	start := (m.bodyOff + page - 1) / page * page
	end := (m.bodyOff + m.bodyLen) / page * page
	if end > start {
		_ = unix.Madvise(e.data[start:end], unix.MADV_DONTNEED)
	}
}

// Reader returns a reader of the entry's batches, decoded without copying
// (their buffers point into the mapping). It retains the entry until it is
// released; batches must not outlive the entry.
func (e *Entry) Reader(mem memory.Allocator) (*ipc.Reader, error) {
	e.Retain()
	mr := &msgReader{e: e}
	mr.refs.Store(1)
	r, err := ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(mem), ipc.WithSchema(e.p.schema))
	if err != nil {
		mr.Release()
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return r, nil
}

// ReadBatch decodes message i without copying: the batch points into the
// mapping, so it must not outlive the entry. The caller releases it.
func (e *Entry) ReadBatch(i int, mem memory.Allocator) (arrow.RecordBatch, error) {
	e.Retain()
	mr := &msgReader{e: e, next: i, last: i + 1}
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
		return nil, fmt.Errorf("%w: message %d is not a batch", ErrCorrupt, i)
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec, nil
}

// msgReader yields an entry's schema message, then its batches (from next
// up to last, 0: all).
type msgReader struct {
	refs atomic.Int64
	e    *Entry
	next int
	last int
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
		meta, _, err := frame(r.e.data, int64(len(magic)), int64(len(r.e.data)))
		if err != nil {
			return nil, err
		}
		r.cur = ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(nil))
		return r.cur, nil
	}
	if r.next >= len(r.e.p.msgs) || (r.last > 0 && r.next >= r.last) {
		return nil, io.EOF
	}
	meta, body, _ := r.e.Batch(r.next)
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
