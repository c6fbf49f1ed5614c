package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/ipccache"
)

// WithCache gives the store an IPC cache of decoded files: reads that ask
// for it (ReadOptions.Cached, as DoGet does) stream cached files without
// decoding them, and fill the cache with the files they decode.
func WithCache(c *ipccache.Cache) Option { return func(o *options) { o.cache = c } }

// WithReadAhead sets how many files a read decodes ahead of the one its
// consumer is on (default GOMAXPROCS-1, at least 1), each on its own
// goroutine.
func WithReadAhead(n int) Option { return func(o *options) { o.readAhead = n } }

// Cache is the store's IPC cache (nil: none).
func (s *Store) Cache() *ipccache.Cache { return s.cache }

// cacheKeyVersion changes when what an entry holds for a file changes
// (how a file is decoded into batches).
const cacheKeyVersion = "quiver-ipc-1"

// schemaPrints memoizes the fingerprints of schemas (a version's schema
// object is shared by every snapshot of it).
var schemaPrints sync.Map // *arrow.Schema -> string

func schemaPrint(sc *arrow.Schema) string {
	if v, ok := schemaPrints.Load(sc); ok {
		return v.(string)
	}
	sum := sha256.Sum256(flight.SerializeSchema(sc, memory.DefaultAllocator))
	v := hex.EncodeToString(sum[:])
	schemaPrints.Store(sc, v)
	return v
}

// cacheKey checks a committed file as opening it would (gone, replaced
// by a link, another size: the read's error) and names its cache entry:
// the file's path, the SHA-256 its record vouches for, its size and
// modification time (a file altered in place gets another key, and is
// read — and checked — from its bytes), and the schema it is read with.
// ok is false when the file cannot be keyed (no modification time).
func (s *Store) cacheKey(ctx context.Context, p profile, sn *Snapshot, df DataFile) (ipccache.Key, bool, error) {
	st, err := s.fs.Stat(ctx, p.join(df.Path))
	if err != nil {
		return ipccache.Key{}, false, s.openErr(ctx, p, df, err)
	}
	if st.Size != df.Bytes {
		return ipccache.Key{}, false, fmt.Errorf("%w: %s: committed file %s has %d bytes, its commit record says %d", ErrDataLoss, p, df.Path, st.Size, df.Bytes)
	}
	if st.ModTime.IsZero() {
		return ipccache.Key{}, false, nil
	}
	return ipccache.KeyOf(cacheKeyVersion, p.dir, df.Path, df.SHA256, strconv.FormatInt(df.Bytes, 10),
		strconv.FormatInt(st.ModTime.UnixNano(), 10), string(sn.Format), schemaPrint(sn.Schema)), true, nil
}

// hit returns the cache entry of df, or nil: a miss, or an entry that
// does not agree with the file's record (it is then not used). With
// verify-reads the file itself is hashed first, as a read of it would be.
func (r *SnapshotReader) hit(df DataFile, key ipccache.Key) *ipccache.Entry {
	e := r.cache.Get(key)
	if e == nil {
		return nil
	}
	if (df.Rows >= 0 && e.Rows() != df.Rows && r.sn.Schema.NumFields() > 0) || !e.Schema().Equal(r.sn.Schema) {
		e.Release()
		return nil
	}
	if r.s.opts.verifyReads {
		f, err := r.s.openData(r.ctx, r.p, df, true)
		if err != nil {
			// The decode path reports it.
			e.Release()
			return nil
		}
		f.Close()
	}
	return e
}

// openErr is the error for a committed file that cannot be opened or
// described: as openData reports it.
func (s *Store) openErr(ctx context.Context, p profile, df DataFile, err error) error {
	switch {
	case isNotExist(err):
		if s.retiredNow(ctx, p, df.Path) {
			return fmt.Errorf("%w: %s: file %s is gone: its version was removed by retention", ErrVersionNotFound, p, df.Path)
		}
		if df.Recorded {
			return fmt.Errorf("%w: %s: committed file %s is missing", ErrDataLoss, p, df.Path)
		}
		return fmt.Errorf("%w: %s: file %s is gone", ErrVersionNotFound, p, df.Path)
	case errors.Is(err, fsys.ErrUnsafePath) && df.Recorded:
		return fmt.Errorf("%w: %s: committed file %s was replaced by a symbolic link (not followed)", ErrDataLoss, p, df.Path)
	}
	return fmt.Errorf("open %s %s: %w", p, df.Path, err)
}

// fillQueue decodes, in the background and one at a time, the files that
// reads of some of their columns found missing from the cache (a read of
// every column fills the cache as it goes).
type fillQueue struct {
	s      *Store
	ctx    context.Context
	cancel context.CancelFunc
	ch     chan fillJob
	mu     sync.Mutex
	queued map[string]bool
	wg     sync.WaitGroup
	once   sync.Once
}

type fillJob struct {
	id         string
	sn         *Snapshot // of the one file
	batchBytes int64
}

// fillQueueLen bounds the files waiting for a background fill; more are
// dropped (a later read asks again).
const fillQueueLen = 256

func newFillQueue(s *Store) *fillQueue {
	ctx, cancel := context.WithCancel(context.Background())
	return &fillQueue{s: s, ctx: ctx, cancel: cancel, ch: make(chan fillJob, fillQueueLen), queued: map[string]bool{}}
}

func (q *fillQueue) stop() {
	q.cancel()
	q.wg.Wait()
}

// fillLater queues a background fill of df.
func (s *Store) fillLater(p profile, sn *Snapshot, df DataFile, batchBytes int64) {
	q := s.fills
	if q == nil || q.ctx.Err() != nil {
		return
	}
	id := p.dir + "\x00" + df.Path
	q.mu.Lock()
	if q.queued[id] {
		q.mu.Unlock()
		return
	}
	q.queued[id] = true
	q.mu.Unlock()
	one := *sn
	one.Files = []DataFile{df}
	select {
	case q.ch <- fillJob{id: id, sn: &one, batchBytes: batchBytes}:
		q.once.Do(func() {
			q.wg.Add(1)
			go q.run()
		})
	default:
		q.mu.Lock()
		delete(q.queued, id)
		q.mu.Unlock()
	}
}

func (q *fillQueue) run() {
	defer q.wg.Done()
	for {
		select {
		case <-q.ctx.Done():
			return
		case j := <-q.ch:
			q.fill(j)
			q.mu.Lock()
			delete(q.queued, j.id)
			q.mu.Unlock()
		}
	}
}

// fill reads one file with every column through the cache, which fills
// its entry.
func (q *fillQueue) fill(j fillJob) {
	r, err := q.s.ReadSnapshot(q.ctx, j.sn, ReadOptions{Cached: true, BatchBytes: j.batchBytes})
	if err != nil {
		return
	}
	defer r.Release()
	for r.Next() {
	}
	if err := r.Err(); err != nil && q.ctx.Err() == nil {
		q.s.opts.log.Debug().Err(err).Str("profile", ProfilePath(j.sn.Keys)).Msg("IPC cache background fill failed")
	}
}
