package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rs/zerolog"
)

// Store is a data directory of profiles. It is safe for concurrent use by
// many goroutines, and any number of processes (and servers) may open the
// same directory at once.
type Store struct {
	root    string // absolute, symlinks resolved
	fs      FS
	opts    options
	lockObs atomic.Pointer[func(wait time.Duration, acquired bool)]
}

// OnLockWait registers fn to be told, after every manifest lock attempt, how
// long the writer waited and whether it got the lock (false: it timed out or
// was cancelled). For metrics; fn must be quick and safe for concurrent use.
// A later call replaces an earlier one.
func (s *Store) OnLockWait(fn func(wait time.Duration, acquired bool)) {
	s.lockObs.Store(&fn)
}

type options struct {
	fs             func(root string) FS
	lockTimeout    time.Duration
	lockPoll       time.Duration
	now            func() time.Time
	host           string
	pid            int
	writer         string
	mem            memory.Allocator
	log            zerolog.Logger
	rowGroupRows   int64
	rowGroupBytes  int64
	readBatchRows  int64
	partitionLimit int
	maxPutBytes    int64
	lockStaleAfter time.Duration
}

// Option configures a Store.
type Option func(*options)

// WithLockTimeout sets how long a writer waits for the manifest lock
// (default 10 s, as pyrosome's LOCK_TIMEOUT).
func WithLockTimeout(d time.Duration) Option { return func(o *options) { o.lockTimeout = d } }

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithHost replaces the host name recorded in locks and commit records.
func WithHost(h string) Option { return func(o *options) { o.host = h } }

// WithWriter sets the default writer identity stamped into commit records
// (default "<user>@<host>:<pid>").
func WithWriter(w string) Option { return func(o *options) { o.writer = w } }

// WithAllocator sets the Arrow allocator used for reads and writes.
func WithAllocator(mem memory.Allocator) Option { return func(o *options) { o.mem = mem } }

// WithLogger sets the logger (default: none).
func WithLogger(l zerolog.Logger) Option { return func(o *options) { o.log = l } }

// WithRowGroupRows caps the rows in one Parquet row group (default 1 Mi, as
// pyarrow).
func WithRowGroupRows(n int64) Option { return func(o *options) { o.rowGroupRows = n } }

// WithRowGroupBytes starts a new row group once the encoded size of the
// current one passes n bytes (default 64 MiB). Together with the per-put
// partition writers this bounds a writer's memory.
func WithRowGroupBytes(n int64) Option { return func(o *options) { o.rowGroupBytes = n } }

// WithReadBatchRows sets the rows per batch a reader yields (default 64 Ki).
func WithReadBatchRows(n int64) Option { return func(o *options) { o.readBatchRows = n } }

// WithMaxPartitions caps the distinct partitions one put may touch
// (default 4096).
func WithMaxPartitions(n int) Option { return func(o *options) { o.partitionLimit = n } }

// WithMaxPutBytes caps the encoded bytes one put may write (0: no limit).
func WithMaxPutBytes(n int64) Option { return func(o *options) { o.maxPutBytes = n } }

// WithLockStaleAfter sets the age after which a manifest lock may be broken
// even when its owner cannot be proven gone (default 10 min).
func WithLockStaleAfter(d time.Duration) Option { return func(o *options) { o.lockStaleAfter = d } }

// WithFS replaces the disk layer: newFS is given the data directory's
// absolute path. For fault injection in tests (a wrapper that fails with
// ENOSPC, say) and, later, other backends.
func WithFS(newFS func(root string) FS) Option { return func(o *options) { o.fs = newFS } }

// Open opens (creating if needed) the data directory dir.
func Open(dir string, opts ...Option) (*Store, error) {
	o := options{
		lockTimeout:    10 * time.Second,
		lockPoll:       20 * time.Millisecond,
		now:            time.Now,
		pid:            os.Getpid(),
		mem:            memory.DefaultAllocator,
		log:            zerolog.Nop(),
		rowGroupRows:   1 << 20,
		rowGroupBytes:  64 << 20,
		readBatchRows:  64 << 10,
		partitionLimit: 4096,
		lockStaleAfter: 10 * time.Minute,
	}
	o.host, _ = os.Hostname()
	for _, opt := range opts {
		opt(&o)
	}
	if o.writer == "" {
		user := os.Getenv("USER")
		if user == "" {
			user = "unknown"
		}
		o.writer = fmt.Sprintf("%s@%s:%d", user, o.host, o.pid)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open data dir: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open data dir: %w", err)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("open data dir: %w", err)
	}
	fsys := NewLocalFS(abs)
	if o.fs != nil {
		fsys = o.fs(abs)
	}
	return &Store{root: abs, fs: fsys, opts: o}, nil
}

// Root is the absolute data directory. It is for the operator's logs only;
// never send it to a client.
func (s *Store) Root() string { return s.root }

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

// resolve validates keys and checks that the profile's directory, as far as
// it exists, stays inside the data directory after symlinks are followed.
func (s *Store) resolve(keys []string) (profile, error) {
	if len(keys) == 0 {
		return profile{}, ValidateKeys(keys)
	}
	keys, err := ParseKeys(keys...)
	if err != nil {
		return profile{}, err
	}
	p := profile{keys: append([]string(nil), keys...), dir: path.Join(keys...)}
	// Follow the longest existing prefix; a symlink planted in the data dir
	// must not lead a key outside it.
	for i := len(keys); i > 0; i-- {
		abs := filepath.Join(s.root, filepath.Join(keys[:i]...))
		real, err := filepath.EvalSymlinks(abs)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return profile{}, fmt.Errorf("%w: %s cannot be resolved", ErrInvalidKey, p)
		}
		if real != s.root && !strings.HasPrefix(real, s.root+string(filepath.Separator)) {
			return profile{}, fmt.Errorf("%w: %s resolves outside the data directory", ErrInvalidKey, p)
		}
		break
	}
	return p, nil
}

// exists reports whether the profile has a manifest.
func (s *Store) exists(p profile) (bool, error) {
	_, err := s.fs.Stat(p.join(manifestName))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscallENOTDIR) {
		return false, nil
	}
	return false, fmt.Errorf("%s: %w", p, err)
}

// checkCreatable refuses to create a profile inside another profile or
// above one.
func (s *Store) checkCreatable(p profile) error {
	for i := 1; i < len(p.keys); i++ {
		anc := profile{keys: p.keys[:i], dir: path.Join(p.keys[:i]...)}
		ok, err := s.exists(anc)
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("%w: cannot create %s inside profile %s", ErrNestedProfile, p, anc)
		}
	}
	entries, err := s.fs.ReadDir(p.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			if _, ok := parseVersionDir(e.Name()); !ok {
				return fmt.Errorf("%w: cannot create %s above other profiles (it holds %q)", ErrNestedProfile, p, e.Name())
			}
		}
	}
	return nil
}

// notFound builds the error for a profile without a manifest, saying when
// the keys name a directory of profiles instead.
func (s *Store) notFound(p profile) error {
	if entries, err := s.fs.ReadDir(p.dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%w: %s is not a profile (it holds other profiles; read them one by one)", ErrNotFound, p)
	}
	return fmt.Errorf("%w: %s", ErrNotFound, p)
}
