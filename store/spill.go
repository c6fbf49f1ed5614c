package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"golang.org/x/sys/unix"

	"github.com/quiverdb/quiver/store/codec"
)

// spill holds the rows of a partitioned write on local disk, grouped by
// partition. A partition's rows are encoded once spillEarly of them
// have come (start: a row group of its file, while the client sends), and
// the rest of each partition once the client has sent them all,
// partition after partition (replay).
//
// Encoding the rows as they came kept a file open for every partition,
// each with its open row group: with the put's memory shared by 64 files,
// their row groups ended every 256 KiB of pages (34,000 column chunks for
// a 1 GiB put), and the writers' buffers and the garbage of their small
// row groups cost the partitioned put twice the CPU of a one-file put
// (docs/benchmarks.md). Rows replayed partition by partition fill one
// file's row groups at a time, as a one-file put does (and the open files
// hold no rows between them). What it costs is a
// write and a read of the put's Arrow bytes through the page cache, and
// temporary disk space for the rows not yet encoded (given back 4 MiB at
// a time as they are, within bound's limit, and wholly as the put ends,
// however it ends: the file has no name).
//
// Each block is one partition's rows of one received batch, written as an
// Arrow IPC stream of its own (schema, dictionaries, batch), so that any
// batch the put accepts is read back as it was.
type spill struct {
	f       *os.File
	fd      int // f's descriptor (punch)
	bw      *bufio.Writer
	end     int64   // bytes written
	live    []int64 // bytes of blocks not yet replayed, per spillChunk of the file
	punched int64   // bytes punched out of the file
	noPunch bool    // the file system cannot punch holes (or failed to once)
	mem     memory.Allocator
	parts   []*spillPart // in order of first appearance
	byDir   map[string]*spillPart
	nblocks int // blocks the parts list

	// The batches received go to add on a goroutine of the spill's own
	// (start), so that receiving the next batch overlaps grouping and
	// writing this one.
	in        chan arrow.RecordBatch
	to        spillTo       // where its rows go
	batch     spillSize     // about the size of a batch drain replays
	early     spillSize     // a partition's rows replayed while the client sends
	once      sync.Once     // (finish)
	streaming atomic.Bool   // the spill gave up (maxSpillBlocks): batches are encoded as they come
	failed    chan struct{} // closed when the goroutine stopped on an error
	exited    chan struct{} // closed when the goroutine returned
	err       error         // its error (set before either is closed)
}

// spillPart is one partition's blocks, in the order received; those
// before next are replayed, the others hold rows rows.
type spillPart struct {
	dir    string
	values map[string]string
	blocks []spillBlock
	next   int
	rows   int64 // not yet replayed
	bytes  int64 // (as written to the file, about their Arrow size)
}

// spillSize is a number of rows and of bytes (Arrow IPC): reached when
// either is.
type spillSize struct{ rows, bytes int64 }

func (z spillSize) reached(rows, bytes int64) bool { return rows >= z.rows || bytes >= z.bytes }

// spillBlock is a block's place in the spill file, and its rows: an IPC
// stream of its own (seg nil), or run run of a segment (its off is the
// segment's, n the bytes of its slices).
type spillBlock struct {
	off, n, rows int64
	seg          *spillSeg
	run          int
}

// spillName is the name spill I/O errors carry: never a server path.
const spillName = "spill"

// openSpill opens an empty spill file in dir, with no name (O_TMPFILE;
// where the file system has none, a named file removed at once).
func openSpill(dir string, mem memory.Allocator) (*spill, error) {
	fd, err := openTmpfile(dir)
	if err != nil {
		f, cerr := os.CreateTemp(dir, ".quiver-spill-*")
		if cerr != nil {
			var pe *os.PathError
			if errors.As(cerr, &pe) { // (its path is the server's)
				cerr = pe.Err
			}
			return nil, spillFail(cerr)
		}
		_ = os.Remove(f.Name())
		fd, err = unix.Dup(int(f.Fd()))
		_ = f.Close()
		if err != nil {
			return nil, spillFail(err)
		}
	}
	f := os.NewFile(uintptr(fd), spillName)
	return &spill{f: f, fd: fd, bw: bufio.NewWriterSize(f, 1<<20), mem: mem, byDir: map[string]*spillPart{}}, nil
}

// spillReadFail is err, met reading block b back: the spill's damage (or
// a bug), never the client's. Its cause is kept as text, not wrapped: an
// io.EOF in the chain (a block cut short) read as the client's stream
// ending early, and the put was refused as INVALID_ARGUMENT with no cause
// in the log (red team round 44, with a spill punched too soon).
func spillReadFail(b spillBlock, err error) error {
	return fmt.Errorf("spill: the block at %d (%d bytes) cannot be read back: %v", b.off, b.n, err)
}

// spillFail is err, of the spill file: ErrSpillFull too if the spill
// directory's file system is full (not the data dir, unless it is that),
// or the file reached the server's file size limit (RLIMIT_FSIZE, systemd's
// LimitFSIZE=: the file's end grows with the whole put, though its space
// is given back as it goes; it failed as an internal error, red team round
// 45's p45_03).
func spillFail(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG) {
		return fmt.Errorf("spill: %w: %w", ErrSpillFull, err)
	}
	return fmt.Errorf("spill: %w", err)
}

// openTmpfile opens a file with no name in dir (a variable for tests: a
// file system without O_TMPFILE).
var openTmpfile = func(dir string) (int, error) {
	return unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
}

// Close gives the file's space back.
func (sp *spill) Close() error { return sp.f.Close() }

// spillWriter counts what it passes to w (and hides whether w is an
// io.Closer: an IPC writer's Close must not close the spill).
type spillWriter struct {
	w io.Writer
	n int64
}

func (c *spillWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// add writes the rows of g (a conformed batch grouped by partition) into
// the spill: one block per partition, its rows gathered a chunk of partitions at a
// time (gatherParts: at most gatherChunkBytes of rows copied at once) on
// workers goroutines.
func (sp *spill) add(ctx context.Context, g *codec.Grouped, workers int) error {
	var rowBytes int64 // (a part's rows are slices of a gathered chunk: its Arrow size is the chunk's)
	if n := g.Data.NumRows(); n > 0 {
		rowBytes = max(1, util.TotalRecordSize(g.Data)/n)
	}
	// The parts spilled by columns (addColumns), and those that go through
	// take: all, for a batch that does not spill by columns; else those
	// whose rows take hands to the encoder as they are.
	var byColumns, taken []codec.Part
	columns := spillsByColumns(g.Data)
	for _, part := range g.Parts {
		if columns && !sp.completes(part, rowBytes) {
			byColumns = append(byColumns, part)
		} else {
			taken = append(taken, part)
		}
	}
	if len(byColumns) > 0 {
		if err := sp.addColumns(ctx, g.Data, byColumns, workers); err != nil {
			return err
		}
	}
	parts := make([]partWrite, len(taken))
	for i, part := range taken {
		parts[i] = partWrite{data: g.Data, rows: part.Rows}
	}
	for i := 0; i < len(parts); {
		n, err := gatherParts(ctx, parts[i:], workers, sp.mem)
		if err != nil {
			return err
		}
		for j := i; j < i+n; j++ {
			if err == nil {
				err = sp.take(ctx, taken[j], parts[j].rec, rowBytes)
			}
			parts[j].rec.Release()
			parts[j].rec = nil
		}
		if err != nil {
			return err
		}
		i += n
	}
	return nil
}

// completes reports whether the rows of part (of about rowBytes each)
// bring its partition's rows not yet replayed to sp.early: take hands
// them to the encoder without writing them to the file.
func (sp *spill) completes(part codec.Part, rowBytes int64) bool {
	p := sp.part(part)
	n := int64(len(part.Rows))
	return sp.to.early != nil && sp.early.reached(p.rows+n, p.bytes+n*rowBytes)
}

// take spills rows (part's rows of a batch, of about rowBytes each) as a
// block of its partition;
// or, when they bring the partition's rows not yet replayed to sp.early,
// hands those rows (read back) and then these (as they are) to the
// encoder, as one row group (to.rows, then to.early), without writing
// them to the file. The rows that complete a row group were written and
// read back for nothing: 1/8 of an even write of 64 partitions (batches
// of 4 Ki rows each), and most of a skewed write's, whose large partition
// came in blocks of tens of MiB, each read back whole (its RSS peaked at
// 300–310 MiB; docs/benchmarks.md).
func (sp *spill) take(ctx context.Context, part codec.Part, rows arrow.RecordBatch, rowBytes int64) error {
	p := sp.part(part)
	if !sp.completes(part, rowBytes) {
		return sp.block(part, rows)
	}
	if err := sp.replayPart(ctx, p, sp.early, sp.to.rows); err != nil {
		return err
	}
	rows.Retain()
	return sp.to.early(&codec.Grouped{Data: rows, Parts: []codec.Part{{Dir: p.dir, Values: p.values, Rows: rowSeq(rows.NumRows())}}})
}

// part returns the spill's partition of part, listed (in order of first
// appearance) if new.
func (sp *spill) part(part codec.Part) *spillPart {
	p := sp.byDir[part.Dir]
	if p == nil {
		p = &spillPart{dir: part.Dir, values: part.Values}
		sp.byDir[part.Dir] = p
		sp.parts = append(sp.parts, p)
	}
	return p
}

// block writes part's rows (rows) as a block of its partition.
func (sp *spill) block(part codec.Part, rows arrow.RecordBatch) error {
	b, err := sp.write(rows)
	if err != nil {
		return err
	}
	sp.list(part, b)
	return nil
}

// list adds b, written, to part's partition's blocks.
func (sp *spill) list(part codec.Part, b spillBlock) {
	p := sp.part(part)
	p.blocks = append(p.blocks, b)
	p.rows += b.rows
	p.bytes += b.n
	sp.nblocks++
}

// spillTo is where a spill's rows go: the put's encoder.
type spillTo struct {
	early   func(g *codec.Grouped) error                        // a partition's rows as a row group of their own, while the client sends
	rows    func(g *codec.Grouped) error                        // a partition's rows as it ends
	end     func(dir string) error                              // after a partition's last rows: its file ends
	stream  func(rec arrow.RecordBatch, g *codec.Grouped) error // a batch encoded as it comes (both taken; g nil: no rows), once the spill gave up
	onPanic func(v any) error                                   // a panic of the spill's goroutine, as an error
}

// maxSpillBlocks bounds the blocks a spill lists (about 40 bytes of memory
// each): a write whose batches give a few rows to each of many partitions
// makes a block per partition and batch, and its list would otherwise grow
// with the put, outside any budget (red team round 11's r01 was the same
// for held rows). Past it, what the spill holds is written, partition after
// partition, and the rest of the put is encoded as it comes.
var maxSpillBlocks = 1 << 16 // (a variable for tests)

// spillFieldBytes is about the IPC metadata a block carries for each field
// of its schema (the schema message's field, the batch's field node and
// buffers).
const spillFieldBytes = 128

// amplifies reports whether g's batch, spilled, would cost the spill more
// than spillAmplification times its Arrow bytes (and 1 MiB): every block
// (one per partition) carries its schema's metadata and every dictionary
// whole, however few of their rows and values it holds. A batch of a
// 20,000-value dictionary spread over 500 partitions wrote 1 GB to the
// spill for 2 MiB sent, and one of 1,000 columns giving a row to each of
// 64 partitions 100 KB a row (red team round 45's p45_01, p45_02). Such a
// write is encoded as it comes, as one whose first batch spreads over too
// many partitions is.
func amplifies(g *codec.Grouped) bool {
	per := int64(0)
	for i, f := range g.Data.Schema().Fields() {
		per += fieldCount(f.Type)*spillFieldBytes + dictionaryBytes(g.Data.Column(i).Data())
	}
	return int64(len(g.Parts))*per > spillAmplification*util.TotalRecordSize(g.Data)+1<<20
}

// spillAmplification is how many times a batch's Arrow bytes its blocks
// may come to (amplifies).
const spillAmplification = 4

// fieldCount is the fields of a column of type t, its own and nested.
func fieldCount(t arrow.DataType) int64 {
	n := int64(1)
	switch t := t.(type) {
	case arrow.NestedType:
		for _, f := range t.Fields() {
			n += fieldCount(f.Type)
		}
	case *arrow.DictionaryType:
		n += fieldCount(t.ValueType)
	}
	return n
}

// dictionaryBytes is the bytes of the dictionaries of d and its children.
func dictionaryBytes(d arrow.ArrayData) int64 {
	n := int64(0)
	if d.DataType().ID() == arrow.DICTIONARY {
		dict := array.MakeFromData(d.Dictionary())
		n += util.TotalArraySize(dict)
		dict.Release()
	}
	for _, c := range d.Children() {
		n += dictionaryBytes(c)
	}
	return n
}

// maxSpillFirstParts is the most partitions a write's first batch may
// give rows to for the write to spill: a batch spread over more (a few
// rows each, as a rule) would make a block per partition and batch, and
// such a write is encoded as it comes, as before the spill (red team round
// 11's r09 shape: 4,000 partitions, one row each per batch).
const maxSpillFirstParts = 512

// start groups every batch of put by the partition columns by and adds
// it, on a goroutine of its own until finish, with at most limit
// partitions (more: ErrInvalidArgument); drain replays the rest, to, in
// batches of about batch.
//
// A partition whose rows not yet replayed come to early (rows or bytes:
// a few large rows are as many bytes as many small ones) has them
// replayed at once, to to.early, as a row group of its file
// (replayPart): the files are encoded while the client sends, the rest of
// each partition as it ends (replay). Past maxSpillBlocks, the spill
// replays what it holds and hands the following batches to to.stream
// (streaming reports it).
func (sp *spill) start(ctx context.Context, by []string, workers, limit int, early, batch spillSize, to spillTo) {
	sp.in = make(chan arrow.RecordBatch)
	sp.to, sp.batch, sp.early = to, batch, early
	sp.failed = make(chan struct{})
	sp.exited = make(chan struct{})
	go func() {
		defer close(sp.exited)
		defer func() {
			if v := recover(); v != nil {
				sp.err = to.onPanic(v)
				close(sp.failed)
			}
		}()
		for rec := range sp.in {
			g, err := codec.GroupByPartition(ctx, rec, by)
			if err == nil && g != nil && !sp.streaming.Load() && sp.nblocks == 0 && len(g.Parts) > maxSpillFirstParts {
				sp.streaming.Store(true) // (the first batch: nothing spilled yet)
			}
			if err == nil && g != nil && !sp.streaming.Load() && amplifies(g) {
				err = sp.giveUp(ctx)
			}
			if err != nil && g != nil {
				g.Release()
			}
			switch {
			case err != nil:
				rec.Release()
			case sp.streaming.Load():
				err = to.stream(rec, g)
			case g == nil: // (no rows)
				rec.Release()
			default:
				err = sp.add(ctx, g, workers)
				g.Release()
				rec.Release()
				if err == nil && len(sp.parts) > limit {
					err = fmt.Errorf("%w: a put may touch at most %d partitions", ErrInvalidArgument, limit)
				}
				for _, p := range sp.parts {
					if err == nil && early.reached(p.rows, p.bytes) {
						err = sp.replayPart(ctx, p, early, to.early)
					}
				}
				if err == nil {
					err = sp.bound(ctx, early, to.early)
				}
				if spillHeldHook != nil {
					spillHeldHook(sp.held(), sp.waiting(), sp.end)
				}
				if err == nil && sp.nblocks > maxSpillBlocks {
					err = sp.giveUp(ctx)
				}
			}
			if err != nil {
				sp.err = err
				close(sp.failed)
				return
			}
		}
	}()
}

// put hands rec (taken) to the spill's goroutine; an error is the one
// that stopped that goroutine.
func (sp *spill) put(rec arrow.RecordBatch) error {
	select {
	case sp.in <- rec:
		return nil
	case <-sp.failed:
		rec.Release()
		return sp.err
	}
}

// finish waits for the batches put so far to be written and returns the
// spill goroutine's error. It is called after start, before drain; it may
// be called again.
func (sp *spill) finish() error {
	sp.once.Do(func() {
		close(sp.in)
		<-sp.exited
	})
	return sp.err
}

// giveUp stops spilling: what the spill holds goes to the encoder first,
// in order (drain), and the following batches are encoded as they come
// (streaming).
func (sp *spill) giveUp(ctx context.Context) error {
	if err := sp.drain(ctx); err != nil {
		return err
	}
	sp.parts, sp.byDir, sp.nblocks = nil, map[string]*spillPart{}, 0
	sp.streaming.Store(true)
	return nil
}

// drain replays what the spill holds and has not replayed (replay), to the
// callbacks start was given.
func (sp *spill) drain(ctx context.Context) error {
	return sp.replay(ctx, sp.batch, sp.to.rows, sp.to.end)
}

// write appends rec to the file as a block.
func (sp *spill) write(rec arrow.RecordBatch) (spillBlock, error) {
	cw := &spillWriter{w: sp.bw}
	w := ipc.NewWriter(cw, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(sp.mem))
	err := w.Write(rec)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return spillBlock{}, spillFail(err)
	}
	b := spillBlock{off: sp.end, n: cw.n, rows: rec.NumRows()}
	sp.end += cw.n
	sp.count(b, 1)
	return b, nil
}

// spillChunk is the span of the spill file whose space (and page cache)
// is given back at once, once every block in it has been replayed.
var spillChunk int64 = 4 << 20 // (a variable for tests)

// count adds b's bytes (sign 1) to, or takes them (-1) from, the live
// bytes of the chunks it spans; a chunk left with none, and wholly
// written, is punched out of the file (punch).
//
// Without it the spill's page cache grew with the put, to the put's
// whole size, and every page of it was memory the machine had not used
// for seconds: on a virtual machine that hands free pages back to its
// host (a balloon's free page reporting, as here), each such page costs a
// fault in the host when first written, and writing 1 GiB into a new file
// took 2.5–3.7 s of CPU where rewriting pages just freed took 0.3 s
// (docs/benchmarks.md, twenty-first session). Replayed chunks punched out,
// the spill's pages are the ones it freed a moment before.
func (sp *spill) count(b spillBlock, sign int64) {
	b.ranges(func(off, n int64) { sp.countRange(off, n, sign) })
}

// countRange is count for the n bytes at off.
func (sp *spill) countRange(off, n, sign int64) {
	for n > 0 {
		c := off / spillChunk
		end := min(off+n, (c+1)*spillChunk)
		for int64(len(sp.live)) <= c {
			sp.live = append(sp.live, 0)
		}
		sp.live[c] += sign * (end - off)
		if sign < 0 && sp.live[c] == 0 && (c+1)*spillChunk <= sp.end {
			sp.punch(c)
		}
		n -= end - off
		off = end
	}
}

// punch gives back chunk c's space. The spill is a scratch file and the
// chunk's blocks are replayed: a file system that cannot punch holes
// keeps the space until the put ends, as it did before.
func (sp *spill) punch(c int64) {
	if sp.noPunch {
		return
	}
	if err := unix.Fallocate(sp.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, c*spillChunk, spillChunk); err != nil {
		sp.noPunch = true
		return
	}
	sp.punched += spillChunk
}

// spillSlack is the space a spill may hold before bound looks at what
// holds it, and spillHeldRatio how many times the bytes of its rows not
// yet replayed it may hold past that.
var (
	spillSlack     int64 = 256 << 20 // (a variable for tests)
	spillHeldRatio int64 = 4
)

// spillHeldHook, if set, sees the space a spill holds, the bytes of its
// blocks not yet replayed and the bytes it has written, after each batch
// (tests).
var spillHeldHook func(held, waiting, written int64)

// held is the space of the file not punched out.
func (sp *spill) held() int64 { return sp.end - sp.punched }

// waiting is the bytes of the blocks not yet replayed.
func (sp *spill) waiting() int64 {
	n := int64(0)
	for _, p := range sp.parts {
		n += p.bytes
	}
	return n
}

// bound keeps the file's space within spillHeldRatio times the bytes of
// the rows it waits to replay (or spillSlack): past it, the partition
// whose oldest block keeps the oldest chunk from being punched has its
// rows replayed at once, as row groups of its file (early, to fn), and
// so on until the chunks come free.
//
// A chunk is given back only once every block in it is replayed, and a
// partition's rows are replayed once early of them have come: a
// partition that gets a few rows of every batch (a skewed put: one large
// partition and many small ones) kept every chunk of the file, and the
// spill held as much space (and page cache) as the whole put, however
// little of it waited to be encoded. Such small partitions now end a row
// group of their own each time the bound is reached, and the file holds
// about spillSlack (docs/reliability.md, red team round 44's follow-up).
func (sp *spill) bound(ctx context.Context, early spillSize, fn func(g *codec.Grouped) error) error {
	for !sp.noPunch && sp.held() > max(spillSlack, spillHeldRatio*sp.waiting()) {
		var oldest *spillPart
		for _, p := range sp.parts {
			if p.next < len(p.blocks) && (oldest == nil || p.blocks[p.next].off < oldest.blocks[oldest.next].off) {
				oldest = p
			}
		}
		if oldest == nil {
			return nil
		}
		if err := sp.replayPart(ctx, oldest, early, fn); err != nil {
			return err
		}
	}
	return nil
}

// read returns the rows of block b.
func (sp *spill) read(b spillBlock) (arrow.RecordBatch, error) {
	r, err := ipc.NewReader(io.NewSectionReader(sp.f, b.off, b.n), ipc.WithAllocator(sp.mem))
	if err != nil {
		return nil, spillReadFail(b, err)
	}
	defer r.Release()
	if !r.Next() {
		err := r.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, spillReadFail(b, err)
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec, nil
}

// replay calls fn with the spilled rows not yet replayed, partition
// after partition in the order they first came, each partition's rows in
// the order received, in batches of about batch, each with its one
// part; then end with the partition's directory, once its rows are all
// replayed (none, perhaps, if replayPart took them). fn takes the batch.
func (sp *spill) replay(ctx context.Context, batch spillSize, fn func(g *codec.Grouped) error, end func(dir string) error) error {
	for _, p := range sp.parts {
		if err := sp.replayPart(ctx, p, batch, fn); err != nil {
			return err
		}
		if err := end(p.dir); err != nil {
			return err
		}
	}
	return nil
}

// replayPart calls fn with the rows of p not yet replayed, in batches of
// about batch (its blocks joined; a block larger alone).
func (sp *spill) replayPart(ctx context.Context, p *spillPart, batch spillSize, fn func(g *codec.Grouped) error) error {
	if p.next == len(p.blocks) {
		return nil
	}
	if err := sp.bw.Flush(); err != nil {
		return spillFail(err)
	}
	var pending []spillBlock
	var n, nb int64
	emit := func() error {
		if len(pending) == 0 {
			return nil
		}
		blocks := pending
		pending, n, nb = nil, 0, 0
		recs, err := sp.readBlocks(blocks)
		if err != nil {
			return err
		}
		for _, b := range blocks {
			sp.count(b, -1)
			p.rows -= b.rows
			p.bytes -= b.n
		}
		joined := joinBatches(recs, sp.mem)
		for i, rec := range joined {
			g := &codec.Grouped{Data: rec, Parts: []codec.Part{{Dir: p.dir, Values: p.values, Rows: rowSeq(rec.NumRows())}}}
			if err := fn(g); err != nil {
				releaseBatches(joined[i+1:])
				return err
			}
		}
		return nil
	}
	for ; p.next < len(p.blocks); p.next++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := p.blocks[p.next]
		pending = append(pending, b)
		n, nb = n+b.rows, nb+b.n
		if batch.reached(n, nb) {
			if err := emit(); err != nil {
				p.next++
				return err
			}
		}
	}
	return emit()
}

// readBlocks returns the rows of bs, in order: the blocks of segments
// one after the other read as one batch, each other block as its own.
func (sp *spill) readBlocks(bs []spillBlock) ([]arrow.RecordBatch, error) {
	var recs []arrow.RecordBatch
	for len(bs) > 0 {
		n := 1
		if bs[0].seg != nil {
			for n < len(bs) && bs[n].seg != nil && (bs[n].seg.sc == bs[0].seg.sc || bs[n].seg.sc.Equal(bs[0].seg.sc)) {
				n++
			}
		}
		var rec arrow.RecordBatch
		var err error
		if bs[0].seg != nil {
			rec, err = sp.readColumns(bs[:n])
		} else {
			rec, err = sp.read(bs[0])
		}
		if err != nil {
			releaseBatches(recs)
			return nil, err
		}
		recs = append(recs, rec)
		bs = bs[n:]
	}
	return recs, nil
}

// joinBatches joins recs (one schema) into one batch, taking them; where
// their columns cannot be joined (dictionaries arrow-go does not unify),
// they are returned as they were.
func joinBatches(recs []arrow.RecordBatch, mem memory.Allocator) []arrow.RecordBatch {
	if len(recs) < 2 {
		return recs
	}
	sc := recs[0].Schema()
	cols := make([]arrow.Array, sc.NumFields())
	var total int64
	for _, rec := range recs {
		total += rec.NumRows()
	}
	for i := range cols {
		arrs := make([]arrow.Array, len(recs))
		for j, rec := range recs {
			arrs[j] = rec.Column(i)
		}
		c, err := array.Concatenate(arrs, mem)
		if err != nil {
			releaseAll(cols[:i])
			return recs
		}
		cols[i] = c
	}
	out := array.NewRecordBatch(sc, cols, total)
	releaseAll(cols)
	releaseBatches(recs)
	return []arrow.RecordBatch{out}
}

// rowSeq is 0, 1, ..., n-1.
func rowSeq(n int64) []int32 {
	rows := make([]int32, n)
	for i := range rows {
		rows[i] = int32(i)
	}
	return rows
}

// releaseBatches releases recs.
func releaseBatches(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// fileEnds commits the files of a spilled write whose encoders have ended
// (their partition's rows are all written), on a goroutine of its own, one
// after the other, while the next partitions are encoded: a file's sync
// (the disk writing it back) is off the encoder's path, and its descriptor
// and storage writer go as soon as it is done, however many partitions the
// write has.
type fileEnds struct {
	q      chan *sink
	exited chan struct{}
	stop   atomic.Bool  // commit no more (the put failed)
	failed atomic.Bool  // a commit failed (err, once waited for)
	mem    atomic.Int64 // what the storage writers not yet committed buffer (an S3 upload's parts)
	err    error        // the first commit's error
	once   sync.Once
}

// startFileEnds starts committing, each file by commit.
func startFileEnds(commit func(k *sink) error) *fileEnds {
	e := &fileEnds{q: make(chan *sink, 16), exited: make(chan struct{})}
	go func() {
		defer close(e.exited)
		for k := range e.q {
			if e.err == nil && !e.stop.Load() {
				if err := e.commit(commit, k); err != nil {
					e.err = err
					e.failed.Store(true)
				} else {
					k.committed = true
				}
			}
			e.mem.Add(-k.endMem)
		}
	}()
	return e
}

// commit runs commit(k), a panic its error.
func (e *fileEnds) commit(commit func(k *sink) error, k *sink) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return commit(k)
}

// add queues k, ended, for its commit.
func (e *fileEnds) add(k *sink) {
	e.mem.Add(k.endMem)
	e.q <- k
}

// wait commits what is queued (none, after stop) and returns the first
// error; it may be called again.
func (e *fileEnds) wait() error {
	e.once.Do(func() {
		close(e.q)
		<-e.exited
	})
	return e.err
}
