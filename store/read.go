package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/quiverdb/quiver/store/codec"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/ipccache"
)

// DefaultReadBatchBytes bounds the size of a batch a reader yields (besides
// WithReadBatchRows) unless ReadOptions.BatchBytes says otherwise, so a
// DoGet whose client stops reading holds a few MiB, not 64 Ki rows of a
// wide table.
const DefaultReadBatchBytes = 4 << 20

// segmentQueue is how many decoded batches each file being read ahead may
// hold before its decoder waits for the consumer. One: with two, a DoGet
// whose client stops reading held 19 MiB (TestLimitsStalledDoGets, bound
// 16 MiB); the decoder working on the next batch already overlaps the send.
const segmentQueue = 1

// ReadOptions select what Read streams.
type ReadOptions struct {
	SnapshotOptions
	// Columns projects the output, in this order; nil means all.
	Columns []string
	// BatchBytes bounds the size of a batch (default
	// DefaultReadBatchBytes). Batches are sized by the decoded size of a
	// row, measured once per read on the first rows of its first file, so
	// it is a target, not a hard limit.
	BatchBytes int64
	// Cached lets the read use the store's IPC cache (WithCache): a file
	// the cache holds with the read's columns is streamed from it as it
	// lies; one it holds with every column is streamed from that entry,
	// the columns picked; otherwise it is decoded. Either way what the
	// read streams is kept as an entry of its columns. Not with
	// WithVerifyReads: the cache is then neither read nor filled. For
	// readers that hand each batch on before asking for the next, like
	// DoGet.
	Cached bool
	// Join joins consecutive small batches (of small files: appends) into
	// batches of about BatchBytes, so that a profile of many small appends
	// streams as few batches as the same rows in large files.
	Join bool
	// Limit, when positive, ends the read after this many rows (the first
	// ones in index order). Reads with a limit do not use the IPC cache.
	Limit int64
	// verify checks every recorded file's SHA-256 before any of it is read
	// (as WithVerifyReads does for all reads): compaction's reads, which
	// vouch for what they copy in a new record.
	verify bool
}

// Read streams a version (latest by default) in index order. Partitions are
// pruned before any file is opened; columns are projected while reading.
// The caller must Release the reader; it must not outlive ctx.
func (s *Store) Read(ctx context.Context, keys []string, o ReadOptions) (*SnapshotReader, error) {
	sn, err := s.Snapshot(ctx, keys, o.SnapshotOptions)
	if err != nil {
		return nil, err
	}
	return s.ReadSnapshot(ctx, sn, o)
}

// Schema returns the schema of a version (-1: latest).
func (s *Store) Schema(ctx context.Context, keys []string, version int) (*arrow.Schema, error) {
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	vs, err := s.readableVersion(ctx, p, version)
	if err != nil {
		return nil, err
	}
	return vs.Schema, nil
}

// OpenSnapshot streams exactly the files of sn, projected to columns (nil:
// all), decoding them (never from the cache).
func (s *Store) OpenSnapshot(ctx context.Context, sn *Snapshot, columns []string) (array.RecordReader, error) {
	r, err := s.ReadSnapshot(ctx, sn, ReadOptions{Columns: columns})
	if err != nil {
		return nil, err // not a typed nil
	}
	return r, nil
}

// ReadSnapshot streams exactly the files of sn with o's columns, batch
// size and use of the cache (o.SnapshotOptions are not used: sn is what is
// read). Nothing is opened until the first Next. Files are opened and
// decoded ahead of the consumer, in order, several at a time (WithReadAhead),
// each holding at most a couple of batches: memory is bounded by the read
// ahead, not the data.
func (s *Store) ReadSnapshot(ctx context.Context, sn *Snapshot, o ReadOptions) (*SnapshotReader, error) {
	p, err := s.resolve(sn.Keys)
	if err != nil {
		return nil, err
	}
	out, err := codec.Project(sn.Schema, o.Columns)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = DefaultReadBatchBytes
	}
	r := &SnapshotReader{s: s, p: p, sn: sn, out: out, o: o, parent: ctx, wide: out, left: o.Limit}
	if o.Join {
		r.fit = codec.NewDictionaryFit(out)
	}
	if extra := filterFields(sn, out); len(extra) > 0 {
		md := out.Metadata()
		r.wide = arrow.NewSchema(append(slices.Clone(out.Fields()), extra...), &md)
	}
	// With verify-reads every byte a read yields comes from a file it has
	// just hashed against its commit record: the cache, whose entries
	// nothing binds to those hashes, is neither read nor filled.
	if o.Cached && s.cache != nil && !s.opts.verifyReads && ipccache.Cacheable(sn.Schema) && sn.Filter == nil && o.Limit <= 0 {
		r.cache = s.cache
		r.whole = o.Columns == nil || out.Equal(sn.Schema)
	}
	r.refs.Store(1)
	return r, nil
}

// SnapshotReader is an array.RecordReader over a snapshot's files. Files
// are read ahead in parallel, and yielded in order.
type SnapshotReader struct {
	// printOnce/schemaFP: the fingerprint of sn.Schema for cache keys,
	// computed once per read (print).
	printOnce sync.Once
	schemaFP  string
	refs      atomic.Int64
	s         *Store
	p         profile
	sn        *Snapshot
	out       *arrow.Schema
	o         ReadOptions
	parent    context.Context
	cache     *ipccache.Cache
	// whole is true when the output is every column in the snapshot's
	// order: cached messages are sent as they are.
	whole bool
	// wide is out and then the columns only the filter reads.
	wide *arrow.Schema
	// fit tells whether batches may be joined (Join): joining unifies
	// their dictionaries, which must still fit narrow indices.
	fit *codec.DictionaryFit
	// left is the rows the limit still allows (Limit > 0).
	left int64
	// rowGroups counts the row groups decoded and skipped by the filter.
	groupsRead, groupsSkipped atomic.Int64

	started bool
	ctx     context.Context
	cancel  context.CancelFunc
	segs    chan *segment
	// slots bounds the segments that exist at once: the one being
	// consumed and those read ahead. A segment's slot is freed when Next
	// has consumed it, so a decoder that finished early does not let
	// another one start while its batches wait.
	slots chan struct{}
	wg    sync.WaitGroup
	// rowBytes is the decoded row size measured on the read's first
	// Parquet file (bits of a float64; 0: not yet).
	rowBytes atomic.Uint64

	seg     *segment
	pending *item // an item pulled while coalescing, yielded next
	cur     item
	rec     arrow.RecordBatch // cur's batch, decoded from its message on demand
	err     error
}

// segment is one file being read ahead: its batches in order.
type segment struct {
	items chan item
}

// item is one batch of a segment: a decoded batch, or a message read
// from a cache entry (entry set, msg >= 0: meta and body, in memory of
// their own), or the error that ends the read.
type item struct {
	rec        arrow.RecordBatch
	entry      *ipccache.Entry // retained by the item when set
	msg        int
	meta, body []byte
	free       func() // returns meta and body's pooled buffer (nil: none)
	rows       int64
	err        error
}

func (it *item) release() {
	if it.rec != nil {
		it.rec.Release()
		it.rec = nil
	}
	if it.entry != nil {
		it.entry.Release()
		it.entry = nil
	}
	if it.free != nil {
		it.free()
		it.free = nil
	}
	it.meta, it.body = nil, nil
}

// Retain adds a reference.
func (r *SnapshotReader) Retain() { r.refs.Add(1) }

// Release drops a reference; the last one stops the read ahead and frees
// everything it held.
func (r *SnapshotReader) Release() {
	if r.refs.Add(-1) == 0 {
		r.clear()
		r.stop()
	}
}

// Schema is the schema of the batches (projected).
func (r *SnapshotReader) Schema() *arrow.Schema { return r.out }

// RecordBatch is the current batch (nil if it could not be decoded from
// the cache: see Err).
func (r *SnapshotReader) RecordBatch() arrow.RecordBatch {
	if r.rec == nil && r.cur.rec != nil {
		return r.cur.rec
	}
	if r.rec == nil && r.cur.entry != nil && r.cur.msg >= 0 {
		// The batch's arrays will alias the message: its buffer is left
		// to the garbage collector, not returned to the pool.
		r.cur.free = nil
		rec, err := r.cur.entry.Decode(r.cur.meta, r.cur.body, r.s.readMem)
		if err != nil {
			r.err = fmt.Errorf("read %s: cached batch: %w", r.p, err)
			return nil
		}
		r.rec = rec
	}
	return r.rec
}

// Record is the deprecated name of RecordBatch.
func (r *SnapshotReader) Record() arrow.RecordBatch { return r.RecordBatch() }

// Message returns the current batch as the IPC message that a cache entry
// holds (flatbuffer metadata and body, read from the entry and checked),
// when the batch comes unchanged from the cache; ok is false otherwise.
// The bytes are the reader's own memory, never a mapping, pooled: they
// stay valid until Next, or, when Hold took them over, until Hold's
// function is called.
func (r *SnapshotReader) Message() (meta, body []byte, rows int64, ok bool) {
	if r.cur.entry == nil || r.cur.msg < 0 {
		return nil, nil, 0, false
	}
	return r.cur.meta, r.cur.body, r.cur.rows, true
}

// Hold keeps what the current batch's memory belongs to until the
// returned function is called, for a consumer that hands the batch's
// buffers on past Next (DoGet, to gRPC, which may write them later).
// Decoded buffers are counted by Arrow (a no-op is returned); a cached
// message sent as it is (Message, and no RecordBatch) is read into a
// pooled buffer, which the first Hold takes over: the function returns it
// to the pool. Call it once per Hold.
func (r *SnapshotReader) Hold() func() {
	if f := r.cur.free; f != nil && r.rec == nil {
		r.cur.free = nil
		return f
	}
	return func() {}
}

// Err is the error that ended the read, if any.
func (r *SnapshotReader) Err() error { return r.err }

func (r *SnapshotReader) clear() {
	if r.rec != nil {
		r.rec.Release()
		r.rec = nil
	}
	r.cur.release()
}

// stop cancels the read ahead, waits for it and frees what it queued.
func (r *SnapshotReader) stop() {
	if !r.started {
		return
	}
	r.cancel()
	drain := func(sg *segment) {
		for it := range sg.items {
			it.release()
		}
	}
	if r.pending != nil {
		r.pending.release()
		r.pending = nil
	}
	if r.seg != nil {
		drain(r.seg)
		r.seg = nil
	}
	for sg := range r.segs {
		drain(sg)
	}
	r.wg.Wait()
}

// Next moves to the next batch (with ReadOptions.Join, consecutive small
// batches joined).
func (r *SnapshotReader) Next() bool {
	r.clear()
	if r.err != nil {
		return false
	}
	if r.o.Limit > 0 && r.started && r.left <= 0 {
		// The limit is reached: nothing more is opened or decoded.
		r.stop()
		return false
	}
	if !r.started {
		r.start()
	}
	it, ok := r.pull()
	if !ok {
		return false
	}
	if it.err != nil {
		r.err = it.err
		it.release()
		r.stop()
		return false
	}
	if r.o.Join && it.rec != nil && r.small(it.rec) {
		it = r.coalesce(it)
		if it.err != nil {
			r.err = it.err
			r.stop()
			return false
		}
	}
	if r.o.Limit > 0 {
		if r.left <= 0 {
			it.release()
			r.stop()
			return false
		}
		if it.rec != nil && it.rec.NumRows() > r.left {
			sl := it.rec.NewSlice(0, r.left)
			it.rec.Release()
			it.rec = sl
		}
		if it.rec != nil {
			r.left -= it.rec.NumRows()
		}
	}
	r.cur = it
	return true
}

// RowGroups counts the Parquet row groups the read has decoded so far and
// those its filter's statistics let it skip.
func (r *SnapshotReader) RowGroups() (read, skipped int64) {
	return r.groupsRead.Load(), r.groupsSkipped.Load()
}

// pull returns the next item of the read in order (false at its end, or
// when its context ended: r.err is set then).
func (r *SnapshotReader) pull() (item, bool) {
	if r.pending != nil {
		it := *r.pending
		r.pending = nil
		return it, true
	}
	for {
		if err := r.parent.Err(); err != nil {
			r.err = err
			r.stop()
			return item{}, false
		}
		if r.seg == nil {
			sg, ok := <-r.segs
			if !ok {
				return item{}, false
			}
			r.seg = sg
		}
		it, ok := <-r.seg.items
		if !ok {
			r.seg = nil
			<-r.slots
			continue
		}
		return it, true
	}
}

// small reports whether a batch is small enough to be joined with the
// next ones.
func (r *SnapshotReader) small(rec arrow.RecordBatch) bool {
	return rec.NumCols() > 0 && util.TotalRecordSize(rec) < r.o.BatchBytes/4
}

// coalesce joins it with the decoded batches that follow while they fit
// in BatchBytes; the first item that does not fit (or an error) is kept
// for the next call to Next.
func (r *SnapshotReader) coalesce(it item) item {
	parts := []item{it}
	size := util.TotalRecordSize(it.rec)
	r.fit.Reset()
	r.fit.Add(it.rec)
	defer r.fit.Reset() // it holds dictionaries of it.rec
	for {
		nx, ok := r.pull()
		if !ok {
			if r.err != nil {
				for i := range parts {
					parts[i].release()
				}
				return item{err: r.err, msg: -1}
			}
			break
		}
		if nx.err != nil || nx.rec == nil {
			r.pending = &nx
			break
		}
		n := util.TotalRecordSize(nx.rec)
		if size+n > r.o.BatchBytes || !r.fit.Add(nx.rec) {
			r.pending = &nx
			break
		}
		parts = append(parts, nx)
		size += n
	}
	if len(parts) == 1 {
		return it
	}
	defer func() {
		for i := range parts {
			parts[i].release()
		}
	}()
	cols := make([]arrow.Array, r.out.NumFields())
	var rows int64
	for _, p := range parts {
		rows += p.rec.NumRows()
	}
	arrs := make([]arrow.Array, len(parts))
	for c := range cols {
		for i, p := range parts {
			arrs[i] = p.rec.Column(c)
		}
		a, err := array.Concatenate(arrs, r.s.readMem)
		if err != nil {
			releaseAll(cols)
			return item{err: fmt.Errorf("read %s: join batches: %w", r.p, err), msg: -1}
		}
		cols[c] = a
	}
	rec := array.NewRecordBatch(r.out, cols, rows)
	releaseAll(cols)
	return item{rec: rec, msg: -1}
}

// ahead is how many files are decoded ahead of the one being consumed
// (whose decoder is often still running: together GOMAXPROCS by default).
// Each open file holds a page of every column it reads, decompressed.
func (s *Store) ahead() int {
	if s.opts.readAhead > 0 {
		return s.opts.readAhead
	}
	return max(1, runtime.GOMAXPROCS(0)-1)
}

// start launches the read ahead: a scheduler that starts one decoder per
// file, in order, while fewer than ahead files are read ahead of the one
// Next consumes, and hands their queues to Next in order.
func (r *SnapshotReader) start() {
	r.started = true
	r.ctx, r.cancel = context.WithCancel(r.parent)
	n := r.s.ahead() + 1
	r.segs = make(chan *segment, n)
	r.slots = make(chan struct{}, n)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(r.segs)
		for _, df := range r.sn.Files {
			select {
			case r.slots <- struct{}{}:
			case <-r.ctx.Done():
				return
			}
			sg := &segment{items: make(chan item, segmentQueue)}
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				defer close(sg.items)
				defer func() {
					// A panic while decoding (a bug, perhaps a file the
					// checks let through) fails this read, not the process:
					// this goroutine is no RPC's, so no interceptor sees it.
					if v := recover(); v != nil {
						var err error = &PanicError{Profile: r.p.String(), Value: v, Stack: debug.Stack()}
						if !df.Recorded {
							// A file no commit record vouches for (another
							// writer's) on which the Parquet reader
							// panicked: corrupt, as far as the client is
							// concerned; the log still shows the panic.
							err = &CorruptionError{Path: r.p.join(df.Path), Err: err}
						}
						r.emit(sg, item{err: err, msg: -1})
					}
				}()
				r.produce(sg, df)
			}()
			select {
			case r.segs <- sg:
			case <-r.ctx.Done():
				// The decoder sees the cancellation too; Next no longer
				// reads its queue, stop drains nothing of it.
				go func() {
					for it := range sg.items {
						it.release()
					}
				}()
				return
			}
		}
	}()
}

// emit queues one item of sg; false (the item released) when the read was
// stopped.
func (r *SnapshotReader) emit(sg *segment, it item) bool {
	select {
	case sg.items <- it:
		return true
	case <-r.ctx.Done():
		it.release()
		return false
	}
}

// fail queues the error that ends the read, as the file's error.
func (r *SnapshotReader) fail(sg *segment, df DataFile, err error) {
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, fsys.ErrUnavailable) &&
		!errors.Is(err, ErrDataLoss) && !errors.Is(err, ErrVersionNotFound) && !errors.Is(err, ErrTooLarge) {
		var ce *CorruptionError
		switch {
		case df.Recorded:
			err = fmt.Errorf("%w: %v", ErrDataLoss, err)
		case errors.Is(err, ErrFormatMismatch):
			// (readFile: files that disagree on a column's type.)
		case !errors.As(err, &ce):
			// Another writer's file whose pages do not decode.
			err = &CorruptionError{Path: r.p.join(df.Path), Err: err}
		}
	}
	r.emit(sg, item{err: fmt.Errorf("read %s %s: %w", r.p, df.Path, err), msg: -1})
}

// produce reads one file into sg: from the cache when it holds the file
// (with this read's columns, or with every column), else decoded; a read
// through the cache keeps what it streams as an entry of its columns.
// testHookProduce, when set (tests), runs at the start of each file's
// decoder.
var testHookProduce func(DataFile)

func (r *SnapshotReader) produce(sg *segment, df DataFile) {
	if testHookProduce != nil {
		testHookProduce(df)
	}
	var keyOut, keyAll ipccache.Key
	cacheable := r.cache != nil && df.Recorded && df.SHA256 != ""
	if cacheable {
		stamp, ok, err := r.s.fileStamp(r.ctx, r.p, df)
		if err != nil {
			r.emit(sg, item{err: fmt.Errorf("read %s %s: %w", r.p, df.Path, err), msg: -1})
			return
		}
		cacheable = ok
		keyOut = cacheKey(r.p, r.sn, r.print(), df, stamp, r.cols())
		keyAll = keyOut
		if !r.whole {
			keyAll = cacheKey(r.p, r.sn, r.print(), df, stamp, nil)
		}
	}
	if cacheable {
		if e := r.hit(df, keyOut, r.out); e != nil {
			defer e.Release()
			r.fromCache(sg, df, e, nil)
			return
		}
		if !r.whole {
			if e := r.hit(df, keyAll, r.sn.Schema); e != nil {
				defer e.Release()
				// Every column: pick this read's, and keep them as an
				// entry of their own, for the next read of them.
				fill, _ := r.cache.Create(keyOut, r.out)
				r.fromCache(sg, df, e, fill)
				return
			}
		}
	}
	var fill *ipccache.Writer
	if cacheable {
		fill, _ = r.cache.Create(keyOut, r.out)
	}
	of, err := r.open(df)
	if err != nil {
		if of != nil {
			of.close()
		}
		if fill != nil {
			fill.Abort()
		}
		r.emit(sg, item{err: err, msg: -1})
		return
	}
	defer of.close()
	for {
		rec, err := r.readFile(of)
		if err != nil {
			if fill != nil {
				fill.Abort()
			}
			r.fail(sg, df, err)
			return
		}
		if rec == nil {
			break
		}
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		fill = r.tee(fill, df, rec)
		if !r.emit(sg, item{rec: rec, msg: -1}) {
			if fill != nil {
				fill.Abort()
			}
			return
		}
	}
	r.commit(fill, df)
}

// cols names the read's columns for its cache key (nil: every column).
func (r *SnapshotReader) cols() []string {
	if r.whole {
		return nil
	}
	return codec.FieldNames(r.out)
}

// tee writes rec into a cache entry being filled; a failed write drops
// the entry (the read goes on).
func (r *SnapshotReader) tee(fill *ipccache.Writer, df DataFile, rec arrow.RecordBatch) *ipccache.Writer {
	if fill == nil {
		return nil
	}
	if err := fill.Write(rec); err != nil {
		fill.Abort()
		r.s.opts.log.Debug().Err(err).Str("profile", r.p.String()).Str("file", df.Path).Msg("IPC cache fill dropped")
		return nil
	}
	return fill
}

// commit publishes a filled entry.
func (r *SnapshotReader) commit(fill *ipccache.Writer, df DataFile) {
	if fill == nil {
		return
	}
	if err := fill.Commit(); err != nil {
		r.s.opts.log.Debug().Err(err).Str("profile", r.p.String()).Str("file", df.Path).Msg("IPC cache fill failed")
	}
}

// fromCache streams a cache entry into sg: its messages as they are when
// they hold the read's columns, else its batches with the columns picked
// (and written to fill, when given).
func (r *SnapshotReader) fromCache(sg *segment, df DataFile, e *ipccache.Entry, fill *ipccache.Writer) {
	if e.Schema().Equal(r.out) {
		for i := range e.NumBatches() {
			if e.BatchRows(i) == 0 {
				continue
			}
			// Read (and checked) here, ahead of the consumer, into memory
			// of its own.
			meta, body, rows, free, err := e.BatchPooled(i)
			if err != nil {
				r.emit(sg, item{err: fmt.Errorf("read %s %s: %w: %w", r.p, df.Path, ErrCacheChanged, err), msg: -1})
				return
			}
			e.Retain()
			if !r.emit(sg, item{entry: e, msg: i, meta: meta, body: body, free: free, rows: rows}) {
				return
			}
		}
		return
	}
	err := func() error {
		src := make([]int, r.out.NumFields())
		for i, f := range r.out.Fields() {
			idx := e.Schema().FieldIndices(f.Name)
			if len(idx) != 1 {
				return fmt.Errorf("the cached copy lacks column %q", f.Name)
			}
			src[i] = idx[0]
		}
		rd, err := e.Reader(r.s.readMem)
		if err != nil {
			return err
		}
		defer rd.Release()
		for rd.Next() {
			in := rd.RecordBatch()
			if in.NumRows() == 0 {
				continue
			}
			cols := make([]arrow.Array, len(src))
			for i, j := range src {
				cols[i] = in.Column(j)
			}
			rec := array.NewRecordBatch(r.out, cols, in.NumRows())
			fill = r.tee(fill, df, rec)
			if !r.emit(sg, item{rec: rec, msg: -1}) {
				if fill != nil {
					fill.Abort() // stopped: the entry is partial
					fill = nil
				}
				return nil
			}
		}
		if err := rd.Err(); errors.Is(err, ipccache.ErrCorrupt) {
			return fmt.Errorf("%w: %w", ErrCacheChanged, err)
		}
		return rd.Err()
	}()
	if err != nil {
		if fill != nil {
			fill.Abort()
		}
		r.emit(sg, item{err: fmt.Errorf("read %s %s: %w", r.p, df.Path, err), msg: -1})
		return
	}
	r.commit(fill, df)
}

// openFile is one file being decoded.
type openFile struct {
	df      DataFile
	rr      array.RecordReader
	closeFn func()
	src     []int         // output column -> column of the file batch, -1 for a partition column, srcNull for a column the file lacks
	consts  []arrow.Array // partition columns, sized to the batch size
	counted bool          // the file reader yields no columns, only rows
}

func (of *openFile) close() {
	if of.rr != nil {
		of.rr.Release()
		of.rr = nil
	}
	releaseAll(of.consts)
	of.consts = nil
	if of.closeFn != nil {
		of.closeFn()
		of.closeFn = nil
	}
}

// open opens one file and plans how its batches become output batches.
// Its errors are the read's (already wrapped).
func (r *SnapshotReader) open(df DataFile) (*openFile, error) {
	of := &openFile{df: df, src: make([]int, r.wide.NumFields())}
	fileCols := make([]string, 0, r.wide.NumFields())
	for i, f := range r.wide.Fields() {
		if slices.Contains(r.sn.PartitionBy, f.Name) {
			of.src[i] = -1
			continue
		}
		if slices.Contains(df.absent, f.Name) {
			of.src[i] = srcNull // written before the column was added
			continue
		}
		of.src[i] = len(fileCols)
		fileCols = append(fileCols, f.Name)
	}
	wrap := func(err error) error { return fmt.Errorf("read %s %s: %w", r.p, df.Path, err) }
	f, err := r.s.openData(r.ctx, r.p, df, r.s.opts.verifyReads || r.o.verify)
	if err != nil {
		return nil, wrap(err)
	}
	ropts := codec.ReadOptions{BatchRows: r.s.opts.readBatchRows, BatchBytes: r.o.BatchBytes, Allocator: r.s.readMem, Parallel: runtime.GOMAXPROCS(0)}
	if r.sn.Format == FormatCSV {
		of.closeFn = func() { _ = f.Close() }
		rr, err := codec.NewCSVReader(f, r.sn.Schema, fileCols, ropts)
		if err != nil {
			return of, wrap(r.s.badFile(r.p, df, err))
		}
		of.rr = rr
		return of, nil
	}
	ropts.RowBytes = math.Float64frombits(r.rowBytes.Load())
	var footerKey, colsKey string
	if sf, ok := f.(fsys.Stamper); ok && df.Recorded && df.SHA256 != "" {
		footerKey = r.p.join(df.Path) + "\x00" + df.SHA256 + "\x00" + sf.Stamp()
		ropts.Metadata = r.s.footers.get(footerKey)
		if colsKey = strings.Join(fileCols, "\x00"); ropts.RowBytes == 0 {
			ropts.RowBytes = r.s.footers.rowBytes(footerKey, colsKey)
		}
	}
	pf, err := codec.OpenParquet(f, f.Size(), ropts)
	if err != nil {
		f.Close()
		return nil, wrap(r.s.badFile(r.p, df, err))
	}
	if footerKey != "" && ropts.Metadata == nil {
		r.s.footers.put(footerKey, pf.Metadata())
	}
	of.closeFn = func() { _ = pf.Close(); _ = f.Close() }
	if err := r.s.checkRows(r.p, df, pf.Footer().Rows, pf.Schema().NumFields()); err != nil {
		return of, wrap(err)
	}
	if !df.Recorded {
		fileCols = r.nullsForLacking(of, pf.Schema(), fileCols)
	}
	if len(fileCols) == 0 && df.Recorded && df.Rows >= 0 && pf.Footer().Rows != df.Rows {
		// A file of a table without columns records no rows: the commit
		// record's count is authoritative.
		of.counted = true
		return of, nil
	}
	var groups []int
	if r.sn.Filter != nil {
		pv := newPartValues(r.sn.Schema, r.sn.PartitionBy)
		part, err := pv.stats(df)
		if err == nil {
			groups, _ = selectRowGroups(r.sn.Filter, pf, part)
		}
		pv.release()
		if err != nil {
			return of, wrap(err)
		}
	}
	if groups == nil {
		r.groupsRead.Add(int64(pf.NumRowGroups()))
	} else {
		r.groupsRead.Add(int64(len(groups)))
		r.groupsSkipped.Add(int64(pf.NumRowGroups() - len(groups)))
	}
	rr, err := pf.RecordsIn(r.ctx, fileCols, groups)
	if err != nil {
		return of, wrap(r.s.badFile(r.p, df, err))
	}
	if rb := pf.RowBytes(); rb > 0 && ropts.RowBytes == 0 {
		r.rowBytes.CompareAndSwap(0, math.Float64bits(rb))
		if footerKey != "" {
			r.s.footers.putRowBytes(footerKey, colsKey, rb)
		}
	}
	of.rr = rr
	return of, nil
}

// readFile returns the next output batch of an open file, or nil at its
// end.
func (r *SnapshotReader) readFile(of *openFile) (arrow.RecordBatch, error) {
	var in arrow.RecordBatch
	var n int64
	if of.counted {
		if of.df.Rows <= 0 {
			return nil, nil
		}
		n = min(of.df.Rows, r.s.opts.readBatchRows)
		of.df.Rows -= n
	} else {
		if !of.rr.Next() {
			return nil, of.rr.Err()
		}
		in = of.rr.RecordBatch()
		n = in.NumRows()
	}
	cols := make([]arrow.Array, r.wide.NumFields())
	for i, f := range r.wide.Fields() {
		var err error
		if of.src[i] == srcNull {
			cols[i], err = r.nullColumn(of, i, f, n)
		} else if of.src[i] < 0 {
			cols[i], err = r.partitionColumn(of, i, f, n)
		} else {
			c := in.Column(of.src[i])
			if cols[i], err = codec.ConformArray(r.ctx, c, f.Type); err != nil && !of.df.Recorded {
				// Another writer's file whose values do not fit the
				// version's type (the schema is its first file's): the
				// version's files disagree, nothing on disk is damaged
				// (red team round 47).
				err = fmt.Errorf("%w: this file (not written by Quiver) holds %s values that do not fit the version's %s (a version's schema is its first file's, and its files must agree): %v",
					ErrFormatMismatch, c.DataType(), f.Type, err)
			}
		}
		if err != nil {
			releaseAll(cols)
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	rec := array.NewRecordBatch(r.wide, cols, n)
	releaseAll(cols)
	if r.sn.Filter == nil {
		return rec, nil
	}
	return r.filterBatch(rec)
}

// filterBatch keeps the rows of a wide batch that pass the filter, as a
// batch of the output columns (one of no rows when none passes).
func (r *SnapshotReader) filterBatch(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	defer rec.Release()
	kept, err := r.sn.Filter.Apply(r.ctx, rec, r.s.readMem)
	if err != nil {
		return nil, err
	}
	if kept == nil {
		cols := make([]arrow.Array, r.out.NumFields())
		for i, f := range r.out.Fields() {
			cols[i] = array.MakeArrayOfNull(r.s.readMem, f.Type, 0)
		}
		defer releaseAll(cols)
		return array.NewRecordBatch(r.out, cols, 0), nil
	}
	if r.wide == r.out {
		return kept, nil
	}
	defer kept.Release()
	return array.NewRecordBatch(r.out, kept.Columns()[:r.out.NumFields()], kept.NumRows()), nil
}

// partitionColumn returns n copies of the file's value of a partition
// column, slicing one cached array.
func (r *SnapshotReader) partitionColumn(of *openFile, i int, f arrow.Field, n int64) (arrow.Array, error) {
	if of.consts == nil {
		of.consts = make([]arrow.Array, r.wide.NumFields())
	}
	if c := of.consts[i]; c == nil || int64(c.Len()) < n {
		if c != nil {
			c.Release()
		}
		size := max(n, min(r.s.opts.readBatchRows, max(of.df.Rows, n)))
		raw, ok := of.df.Partition[f.Name]
		if !ok {
			raw = codec.HiveDefault
		}
		a, err := codec.ConstantColumn(r.s.readMem, f.Type, raw, int(size))
		if err != nil {
			return nil, err
		}
		of.consts[i] = a
	}
	return array.NewSlice(of.consts[i], 0, n), nil
}

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}

// print returns the fingerprint of the read's schema (cache keys), once.
func (r *SnapshotReader) print() string {
	r.printOnce.Do(func() { r.schemaFP = schemaPrint(r.sn.Schema) })
	return r.schemaFP
}
