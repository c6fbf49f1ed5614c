package ipccache

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Writer fills one entry. Exactly one of Commit or Abort must be called;
// nothing is visible before Commit returns nil.
type Writer struct {
	c     *Cache
	name  string
	tmp   string
	f     *os.File
	bw    *bufio.Writer
	crc   hash.Hash32
	mcrc  hash.Hash32 // of the message being written
	off   int64
	limit int64
	ipcw  *ipc.Writer
	rows  int64 // rows of the batch being written
	total int64
	nmsg  int
	index []byte
	err   error
	done  bool
}

// Create starts the entry of key for batches of sc. ErrBusy when the
// cache holds it or another writer is filling it; ErrUnsupported for a
// schema with dictionary fields.
func (c *Cache) Create(key Key, sc *arrow.Schema) (*Writer, error) {
	if !Cacheable(sc) {
		return nil, ErrUnsupported
	}
	name := key.name()
	c.mu.Lock()
	if c.items[name] != nil || c.writing[name] {
		c.mu.Unlock()
		return nil, ErrBusy
	}
	c.writing[name] = true
	c.mu.Unlock()
	f, err := os.CreateTemp(c.dir, "."+name+".*.tmp")
	if err != nil {
		c.unmark(name)
		return nil, fmt.Errorf("ipccache: create entry: %w", err)
	}
	w := &Writer{c: c, name: name, tmp: f.Name(), f: f, crc: crc32.New(castagnoli), mcrc: crc32.New(castagnoli), limit: c.max / 2}
	w.bw = bufio.NewWriterSize(f, 1<<20)
	w.write([]byte(magic))
	w.ipcw = ipc.NewWriterWithPayloadWriter(payloadWriter{w}, ipc.WithSchema(sc), ipc.WithAllocator(memory.DefaultAllocator))
	return w, nil
}

func (c *Cache) unmark(name string) {
	c.mu.Lock()
	delete(c.writing, name)
	c.mu.Unlock()
}

// Write appends one batch as one message.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.err != nil {
		return w.err
	}
	w.rows = rec.NumRows()
	if err := w.ipcw.Write(rec); err != nil && w.err == nil {
		w.err = fmt.Errorf("ipccache: encode batch: %w", err)
	}
	return w.err
}

// Bytes is how much has been written so far.
func (w *Writer) Bytes() int64 { return w.off }

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	if w.off+int64(len(b)) > w.limit {
		w.err = ErrTooLarge
		return
	}
	if _, err := w.bw.Write(b); err != nil {
		w.err = fmt.Errorf("ipccache: write entry: %w", err)
		return
	}
	w.crc.Write(b)
	w.mcrc.Write(b)
	w.off += int64(len(b))
}

var zeros [64]byte

// payloadWriter frames the IPC writer's payloads as stream messages and
// indexes the batches.
type payloadWriter struct{ w *Writer }

func (p payloadWriter) Start() error { return nil }
func (p payloadWriter) Close() error { return nil }

func (p payloadWriter) WritePayload(pl ipc.Payload) error {
	w := p.w
	meta := pl.Meta()
	defer meta.Release()
	mb := meta.Bytes()
	padded := (len(mb) + 7) &^ 7
	start := w.off
	w.mcrc.Reset()
	var hdr [8]byte
	binary.LittleEndian.PutUint32(hdr[0:], 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(padded))
	w.write(hdr[:])
	w.write(mb)
	w.write(zeros[:padded-len(mb)])
	bodyStart := w.off
	if w.err == nil {
		if err := pl.SerializeBody(writerFunc(func(b []byte) (int, error) {
			w.write(b)
			if w.err != nil {
				return 0, w.err
			}
			return len(b), nil
		})); err != nil && w.err == nil {
			w.err = err
		}
	}
	if w.err != nil {
		return w.err
	}
	if w.nmsg > 0 { // the first payload is the schema
		var row [indexRow]byte
		binary.LittleEndian.PutUint64(row[0:], uint64(start))
		binary.LittleEndian.PutUint32(row[8:], uint32(len(mb)))
		binary.LittleEndian.PutUint32(row[12:], uint32(padded))
		binary.LittleEndian.PutUint64(row[16:], uint64(w.off-bodyStart))
		binary.LittleEndian.PutUint64(row[24:], uint64(w.rows))
		binary.LittleEndian.PutUint32(row[32:], w.mcrc.Sum32())
		w.index = append(w.index, row[:]...)
		w.total += w.rows
	}
	w.nmsg++
	return nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// Commit finishes the entry and publishes it (rename), evicting older
// entries if the cache is over its size.
func (w *Writer) Commit() error {
	if w.done {
		return errors.New("ipccache: entry already finished")
	}
	if err := w.ipcw.Close(); err != nil && w.err == nil {
		w.err = fmt.Errorf("ipccache: finish entry: %w", err)
	}
	w.write(w.index)
	var tr [trailerLen]byte
	n := w.nmsg - 1
	if n < 0 {
		n = 0
	}
	binary.LittleEndian.PutUint64(tr[0:], uint64(n))
	binary.LittleEndian.PutUint64(tr[8:], uint64(w.total))
	w.write(tr[:16])
	binary.LittleEndian.PutUint32(tr[16:], w.crc.Sum32())
	binary.LittleEndian.PutUint32(tr[20:], formatV)
	copy(tr[24:], trailerMagic)
	w.write(tr[16:])
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.err = fmt.Errorf("ipccache: write entry: %w", err)
		}
	}
	if err := w.f.Close(); err != nil && w.err == nil {
		w.err = fmt.Errorf("ipccache: write entry: %w", err)
	}
	w.done = true
	if w.err == nil {
		// Not fsynced: the checksum finds what a crash lost.
		if err := os.Rename(w.tmp, w.c.path(w.name)); err != nil {
			w.err = fmt.Errorf("ipccache: publish entry: %w", err)
		}
	}
	if w.err != nil {
		_ = os.Remove(w.tmp)
		w.c.unmark(w.name)
		return w.err
	}
	w.c.add(w.name, w.off)
	return nil
}

// Abort discards the entry. It is a no-op after Commit.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	_ = w.ipcw.Close()
	_ = w.f.Close()
	_ = os.Remove(w.tmp)
	w.c.unmark(w.name)
}
