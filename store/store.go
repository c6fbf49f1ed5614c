package store

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/quiverdb/quiver/store/codec"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/ipccache"
)

// Store is a data directory of profiles. It is safe for concurrent use by
// many goroutines, and any number of processes (and servers) may open the
// same directory at once.
type Store struct {
	fs      fsys.FS
	root    string // for logs only
	opts    options
	id      Owner
	lockObs atomic.Pointer[func(wait time.Duration, acquired bool)]

	mu       sync.Mutex
	profiles map[string]*profileState
	// writing counts this process's puts in flight per profile
	// directory (Writing), under mu.
	writing map[string]int
	// putsBegun counts the puts begun (PutsBegun).
	putsBegun atomic.Uint64
	budget    *memBudget
	bg        sync.WaitGroup // background work (automatic compaction, syncs of released locks)
	// quit is closed by Close: background work that waits stops.
	quit      chan struct{}
	closeOnce sync.Once
	// cache is the IPC cache of decoded files (nil: none; readcache.go).
	cache *ipccache.Cache
	// readMem allocates what reads decode: a pool unless WithAllocator
	// gave another allocator (pool.go).
	readMem memory.Allocator
	// footers keeps the parsed footers of files read (footercache.go).
	footers *footerCache
}

// OnLockWait registers fn to be told, after every manifest lock attempt, how
// long the writer waited and whether it got the lock (false: it timed out or
// was cancelled). For metrics; fn must be quick and safe for concurrent use.
// A later call replaces an earlier one.
func (s *Store) OnLockWait(fn func(wait time.Duration, acquired bool)) {
	s.lockObs.Store(&fn)
}

type options struct {
	fs             fsys.FS
	lockTimeout    time.Duration
	lockPoll       time.Duration
	now            func() time.Time
	host           string
	pid            int
	procs          procs
	writer         string
	mem            memory.Allocator
	log            zerolog.Logger
	rowGroupRows   int64
	rowGroupBytes  int64
	readBatchRows  int64
	partitionLimit int
	maxPutBytes    int64
	putMemory      int64
	lockStaleAfter time.Duration
	signer         ed25519.PrivateKey
	verifyReads    bool
	compression    codec.Compression
	autoCompact    AutoCompact
	readAhead      int
	cache          *ipccache.Cache
	groupBytes     int64
	memSet         bool // WithAllocator was given
	spillDir       string
}

// Option configures a Store.
type Option func(*options)

// WithSpillDir sets the local directory where a partitioned write holds
// its rows until the client has sent them all (spill.go): by default the
// data directory on a local disk, and os.TempDir() on any other storage.
// SpillOff: no spill; a partitioned write encodes its rows as they come,
// with a file open for every partition it has seen (as appends do).
func WithSpillDir(dir string) Option { return func(o *options) { o.spillDir = dir } }

// SpillOff is the WithSpillDir that turns spilling off.
const SpillOff = "off"

// WithLockTimeout sets how long a writer waits for the manifest lock
// (default 10 s, as pyrosome's LOCK_TIMEOUT).
func WithLockTimeout(d time.Duration) Option { return func(o *options) { o.lockTimeout = d } }

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithHost replaces the host name recorded in locks and commit records.
func WithHost(h string) Option { return func(o *options) { o.host = h } }

// WithPID replaces the process id recorded in locks (tests impersonate
// other processes).
func WithPID(pid int) Option { return func(o *options) { o.pid = pid } }

// WithWriter sets the default writer identity stamped into commit records
// (default "<user>@<host>:<pid>").
func WithWriter(w string) Option { return func(o *options) { o.writer = w } }

// WithAllocator sets the Arrow allocator used for reads and writes.
func WithAllocator(mem memory.Allocator) Option {
	return func(o *options) { o.mem, o.memSet = mem, true }
}

// WithLogger sets the logger (default: none).
func WithLogger(l zerolog.Logger) Option { return func(o *options) { o.log = l } }

// WithRowGroupRows caps the rows in one Parquet row group (default 1 Mi, as
// pyarrow).
func WithRowGroupRows(n int64) Option { return func(o *options) { o.rowGroupRows = n } }

// WithRowGroupBytes starts a new row group once the encoded size of the
// current one passes n bytes (default 16 MiB; a put writing several
// files at once divides it among them).
func WithRowGroupBytes(n int64) Option { return func(o *options) { o.rowGroupBytes = n } }

// WithReadBatchRows sets the rows per batch a reader yields (default 64 Ki).
func WithReadBatchRows(n int64) Option { return func(o *options) { o.readBatchRows = n } }

// WithMaxPartitions caps the distinct partitions one put may touch
// (default 4096).
func WithMaxPartitions(n int) Option { return func(o *options) { o.partitionLimit = n } }

// WithMaxPutBytes caps the bytes one put may send and write (0: no limit).
func WithMaxPutBytes(n int64) Option { return func(o *options) { o.maxPutBytes = n } }

// WithPutMemory sets the store-wide budget of memory that open Parquet
// writers of all puts may buffer (default 128 MiB; 0 keeps the default).
// Writers over their share flush a row group early; a put whose files
// cannot fit even then fails with ErrTooLarge.
func WithPutMemory(n int64) Option { return func(o *options) { o.putMemory = n } }

// WithLockStaleAfter sets the age after which a manifest lock may be broken
// even when its owner cannot be proven gone (default 10 min).
func WithLockStaleAfter(d time.Duration) Option { return func(o *options) { o.lockStaleAfter = d } }

// WithSigningKey signs every commit record with key (ed25519): an auditor
// with the public key can then prove that no record was rewritten, even by
// someone with write access to the storage.
func WithSigningKey(key ed25519.PrivateKey) Option { return func(o *options) { o.signer = key } }

// WithVerifyReads makes every read hash each file while reading it and
// fail with ErrDataLoss when the hash differs from its commit record.
// Reads then bypass the IPC cache (WithCache): they neither read nor
// fill it.
func WithVerifyReads(on bool) Option { return func(o *options) { o.verifyReads = on } }

// WithCompression sets the compression of the Parquet files the store
// writes (default zstd; lz4_raw, snappy or none trade size for speed).
func WithCompression(c codec.Compression) Option { return func(o *options) { o.compression = c } }

// WithFS replaces the storage (an S3 bucket, a fault-injecting wrapper).
// Open's directory argument is then only used in log lines.
func WithFS(f fsys.FS) Option { return func(o *options) { o.fs = f } }

func withProcs(p procs) Option { return func(o *options) { o.procs = p } }

// DefaultPutMemory is the default budget of WithPutMemory.
const DefaultPutMemory = 128 << 20

// Open opens (creating if needed) the data directory dir on the local file
// system, or the storage given by WithFS.
func Open(dir string, opts ...Option) (*Store, error) {
	o := options{
		lockTimeout:    10 * time.Second,
		lockPoll:       20 * time.Millisecond,
		now:            time.Now,
		pid:            os.Getpid(),
		procs:          linuxProcs{},
		mem:            memory.DefaultAllocator,
		log:            zerolog.Nop(),
		rowGroupRows:   1 << 20,
		rowGroupBytes:  16 << 20,
		readBatchRows:  64 << 10,
		partitionLimit: 4096,
		lockStaleAfter: 10 * time.Minute,
		putMemory:      DefaultPutMemory,
		groupBytes:     DefaultGroupAppendBytes,
	}
	o.host, _ = os.Hostname()
	for _, opt := range opts {
		opt(&o)
	}
	if o.putMemory <= 0 {
		o.putMemory = DefaultPutMemory
	}
	if o.writer == "" {
		user := os.Getenv("USER")
		if user == "" {
			user = "unknown"
		}
		o.writer = fmt.Sprintf("%s@%s:%d", user, o.host, o.pid)
	}
	s := &Store{opts: o, profiles: map[string]*profileState{}, writing: map[string]int{}, budget: newMemBudget(o.putMemory), cache: o.cache, quit: make(chan struct{})}
	s.readMem = o.mem
	s.footers = newFooterCache(footerCacheBytes)
	if !o.memSet {
		s.readMem = newPoolAllocator()
	}
	s.id = newIdentity(o.host, o.pid, o.procs, o.writer)
	if o.fs != nil {
		s.fs, s.root = o.fs, dir
		s.markClaims()
		if s.opts.spillDir == "" {
			s.opts.spillDir = os.TempDir()
		}
		if err := s.checkSpill(); err != nil {
			return nil, err
		}
		return s, nil
	}
	l, err := fsys.NewLocal(dir)
	if err != nil {
		return nil, fmt.Errorf("open data dir: %w", err)
	}
	s.fs, s.root = l, l.Root()
	s.markClaims()
	if s.opts.spillDir == "" {
		s.opts.spillDir = l.Root()
	}
	if err := s.checkSpill(); err != nil {
		return nil, err
	}
	return s, nil
}

// checkSpill makes and removes a spill file, so that a spill directory
// that cannot hold one is found at start, not by the first partitioned
// write.
func (s *Store) checkSpill() error {
	if s.opts.spillDir == SpillOff {
		return nil
	}
	sp, err := openSpill(s.opts.spillDir, s.opts.mem)
	if err != nil {
		return fmt.Errorf("spill directory %s: %w", s.opts.spillDir, err)
	}
	return sp.Close()
}

// Root is the data directory as given or resolved. It is for the operator's
// logs only; never send it to a client.
func (s *Store) Root() string { return s.root }

// FS is the storage under the store, for maintenance (store/maint).
func (s *Store) FS() fsys.FS { return s.fs }

// Close waits for background work (automatic compactions) and releases
// the storage.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.quit) })
	s.bg.Wait()
	if c, ok := s.fs.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// profile is a resolved profile: its keys and its directory relative to the
// data dir.
type profile struct {
	keys []string
	dir  string // slash-separated, relative to root
}

func (p profile) String() string { return ProfilePath(p.keys) }

func (p profile) join(elem ...string) string {
	return path.Join(append([]string{p.dir}, elem...)...)
}

func (p profile) vdir(v int) string { return p.join(VersionName(v)) }

// resolve validates keys. The storage itself refuses to follow links.
func (s *Store) resolve(keys []string) (profile, error) {
	if len(keys) == 0 {
		return profile{}, ValidateKeys(keys)
	}
	keys, err := ParseKeys(keys...)
	if err != nil {
		return profile{}, err
	}
	return profile{keys: append([]string(nil), keys...), dir: path.Join(keys...)}, nil
}

// notFound builds the error for a profile without a manifest, saying when
// the keys name a directory of profiles instead.
func (s *Store) notFound(ctx context.Context, p profile) error {
	if entries, err := s.fs.List(ctx, p.dir); err == nil {
		for _, e := range entries {
			if e.Dir && validateKey(e.Name) == nil {
				return fmt.Errorf("%w: %s is not a profile (it holds other profiles; read them one by one)", ErrNotFound, p)
			}
		}
	}
	return fmt.Errorf("%w: %s", ErrNotFound, p)
}

// isNotExist reports errors that mean "nothing there", including a path
// component that is a file (ENOTDIR).
func isNotExist(err error) bool {
	return errors.Is(err, fsys.ErrNotExist) || errors.Is(err, syscallENOTDIR)
}

// notPlainFile reports whether a read found a directory, a link or a
// special file where the store keeps a file of its own (manifest, lock,
// schema policy): tampering, which callers report as corruption.
func notPlainFile(err error) bool {
	return errors.Is(err, fsys.ErrNotRegular) || errors.Is(err, fsys.ErrUnsafePath)
}
