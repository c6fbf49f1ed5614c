// Command quiver is the Quiver binary: `quiver serve` runs the Arrow Flight
// service over a data directory; client and admin subcommands hang off the
// same root command.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/quiverdb/quiver/flightserver"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/codec"
	"github.com/quiverdb/quiver/store/ipccache"
	"github.com/quiverdb/quiver/store/maint"
)

func main() {
	if err := newRoot(os.Stdout, os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "quiver:", oneLine(err))
		os.Exit(1)
	}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "quiver",
		Short:         "Quiver: an Arrow Flight service over a versioned Parquet store",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newServe(stdout, stderr))
	root.AddCommand(newPut(stdout, stderr), newGet(stdout, stderr), newLs(stdout, stderr))
	root.AddCommand(newVersions(stdout, stderr), newSchema(stdout, stderr), newLineage(stdout, stderr), newVerify(stdout, stderr))
	root.AddCommand(newGC(stdout, stderr), newCompact(stdout, stderr), newSweep(stdout, stderr), newBreakLock(stdout, stderr), newSchemaPolicy(stdout, stderr))
	root.AddCommand(newKeygen(stdout))
	addHints(root)
	return root
}

// serveConfig is what `quiver serve` is configured with.
type serveConfig struct {
	dataDir      string
	storage      storageFlags
	addr         string
	logLevel     string
	logFormat    string
	maxRecv      int
	maxSend      int
	maxPutBytes  int64
	memoryLimit  string
	putMemory    string
	spillDir     string
	groupAppend  string
	autoCompact  int
	compactSmall string
	signingKey   string
	verifyReads  bool
	compression  string
	cacheDir     string
	cacheSize    string
	readAhead    int
	lockStale    time.Duration
	grace        time.Duration
	stopTimeout  time.Duration
	lockTimeout  time.Duration
	sweepEvery   time.Duration
	endpointSize int64

	authFile       string
	insecureNoAuth bool
	sessionTTL     time.Duration
	tlsCert        string
	tlsKey         string
	tlsClientCA    string
	metricsAddr    string
	pprof          bool
	maxStreams     uint32
	idleTimeout    time.Duration
	connIdle       time.Duration
	maxConns       int

	maxColumns    int
	maxDepth      int
	maxInflight   string
	inflightWait  time.Duration
	sendTimeout   time.Duration
	authChecks    int
	authQueue     int
	authRate      float64
	authRatePerIP float64
	loginCacheTTL time.Duration
}

// defaultMemoryLimit is serve's soft heap limit unless --memory-limit or
// GOMEMLIMIT says otherwise: with the default put memory (128 MiB) a 1 GiB
// put, one file or 64 partitions, peaks at about 300 MiB RSS, 250 of it
// anonymous (docs/benchmarks.md). It was 256 MiB until pages were compressed by
// libzstd, whose memory (and the cgo runtime's) the limit does not see:
// that put 10-18 MB more under the same limit; at 240 MiB puts peak as
// before, at the same throughput (side by side).
const (
	defaultMemoryLimit     = 240 << 20
	defaultMemoryLimitName = "240MiB"
)

// limitedGCPercent is serve's GOGC under a memory limit, unless GOGC is
// set: the heap may grow to five times what is live before a collection,
// up to the limit.
const limitedGCPercent = 400

// parseBytes reads a size such as 268435456, 256MiB, 512MB or 1GiB.
func parseBytes(v string) (int64, error) {
	t := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.m
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size (like 256MiB)", v)
	}
	return n * mult, nil
}

// limitOptions turns the limit flags of serve into server options.
func limitOptions(c serveConfig) ([]flightserver.Option, error) {
	if c.maxColumns <= 0 || c.maxDepth <= 0 {
		return nil, errors.New("--max-columns and --max-depth must be positive")
	}
	var inflight int64
	if strings.TrimSpace(c.maxInflight) != "0" {
		n, err := parseBytes(c.maxInflight)
		if err != nil {
			return nil, fmt.Errorf("--max-inflight-bytes: %w", err)
		}
		if n < int64(c.maxRecv) {
			return nil, fmt.Errorf("--max-inflight-bytes (%d) must be at least --max-recv-msg-size (%d): each receive reserves that much", n, c.maxRecv)
		}
		inflight = n
	}
	if c.connIdle < 0 || c.maxConns < 0 {
		return nil, errors.New("--max-connection-idle and --max-connections must not be negative (0: no limit)")
	}
	if c.authChecks <= 0 || c.authQueue < 0 || c.authRate < 0 || c.authRatePerIP < 0 {
		return nil, errors.New("--auth-checks must be positive; --auth-queue, --auth-rate and --auth-rate-per-ip not negative")
	}
	pl := flightserver.DefaultPasswordLimits
	pl.Concurrent, pl.Queue = c.authChecks, c.authQueue
	pl.Rate, pl.Burst = c.authRate, max(1, int(math.Ceil(2*c.authRate)))
	pl.PeerRate, pl.PeerBurst = c.authRatePerIP, max(1, int(math.Ceil(2.5*c.authRatePerIP)))
	return []flightserver.Option{
		flightserver.WithMaxColumns(c.maxColumns),
		flightserver.WithMaxDepth(c.maxDepth),
		flightserver.WithMaxInflightBytes(inflight),
		flightserver.WithInflightWait(c.inflightWait),
		flightserver.WithSendTimeout(c.sendTimeout),
		flightserver.WithPasswordLimits(pl),
		flightserver.WithMaxConnectionIdle(c.connIdle),
		flightserver.WithMaxConnections(c.maxConns),
	}, nil
}

// env returns the QUIVER_* variable or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func newServe(stdout, stderr io.Writer) *cobra.Command {
	var c serveConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the data directory over Arrow Flight",
		Long: `Serve the data directory over Arrow Flight until SIGTERM or SIGINT.

The flags whose help names an environment variable ("env QUIVER_…")
can also be set with it (--data-dir: QUIVER_DATA_DIR, --addr:
QUIVER_ADDR, --log-level: QUIVER_LOG_LEVEL, --log-format:
QUIVER_LOG_FORMAT, …); a flag wins over the environment, and the others
are set by flag only. Once listening, serve prints "quiver: serving <data-dir> on
<host:port>" on stdout (useful with --addr 127.0.0.1:0).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), c, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.dataDir, "data-dir", env("QUIVER_DATA_DIR", "./data"), "data directory, or s3://bucket/prefix (env QUIVER_DATA_DIR)")
	addStorageFlags(f, &c.storage)
	f.StringVar(&c.addr, "addr", env("QUIVER_ADDR", "localhost:8815"), "listen address host:port (env QUIVER_ADDR)")
	f.StringVar(&c.logLevel, "log-level", env("QUIVER_LOG_LEVEL", "info"), "debug, info, warn or error (env QUIVER_LOG_LEVEL)")
	f.StringVar(&c.logFormat, "log-format", env("QUIVER_LOG_FORMAT", "json"), "json or console (env QUIVER_LOG_FORMAT)")
	f.IntVar(&c.maxRecv, "max-recv-msg-size", flightserver.DefaultMaxRecvMsgSize, "largest message (one DoPut batch) a client may send, bytes")
	f.IntVar(&c.maxSend, "max-send-msg-size", flightserver.DefaultMaxSendMsgSize, "DoGet slices batches to keep each message under this many bytes")
	f.Int64Var(&c.maxPutBytes, "max-put-bytes", 0, "largest encoded size of one put, bytes (0: no limit)")
	f.StringVar(&c.memoryLimit, "memory-limit", env("QUIVER_MEMORY_LIMIT", "auto"), "soft limit of the Go heap, e.g. 1GiB: the garbage collector works harder near it; auto: "+defaultMemoryLimitName+" unless GOMEMLIMIT is set (a 1 GiB put then peaks at about 280 MiB RSS); under a limit GOGC is 400 unless set; off: none (env QUIVER_MEMORY_LIMIT)")
	f.IntVar(&c.autoCompact, "auto-compact", 0, "compact a profile's latest version in the background once it holds more than this many small files (0: off)")
	f.StringVar(&c.compactSmall, "auto-compact-small", env("QUIVER_AUTO_COMPACT_SMALL", "16MiB"), "with --auto-compact: the size under which a file counts as small (env QUIVER_AUTO_COMPACT_SMALL)")
	f.StringVar(&c.groupAppend, "group-append-bytes", env("QUIVER_GROUP_APPEND_BYTES", "1MiB"), "an unpartitioned Parquet append of at most this much Arrow data is written by its commit cycle into one file shared with the cycle's other small appends, each keeping its own commit record; 0 gives every append a file of its own (env QUIVER_GROUP_APPEND_BYTES)")
	f.StringVar(&c.spillDir, "spill-dir", env("QUIVER_SPILL_DIR", ""), "local directory where a partitioned write holds its rows, grouped by partition (as Arrow, in a file with no name), encoding a partition's rows as a row group each time 32 Ki of them have come and the rest once the client has sent them all: it needs free space for the rows not yet encoded, at most the write's Arrow bytes (the space of encoded rows is given back as it goes) (default: the data directory on a local disk, else the system's temporary directory; off: write every partition's file as rows come, all of them open at once) (env QUIVER_SPILL_DIR)")
	f.StringVar(&c.putMemory, "put-memory", env("QUIVER_PUT_MEMORY", "128MiB"), "memory all puts' Parquet writers may hold together; over it they flush row groups early and finish the files of their least recently written partitions (env QUIVER_PUT_MEMORY)")
	f.StringVar(&c.signingKey, "signing-key", env("QUIVER_SIGNING_KEY", ""), "ed25519 private key file (from quiver keygen): sign every commit record; auditors check with quiver verify --public-key (env QUIVER_SIGNING_KEY)")
	f.BoolVar(&c.verifyReads, "verify-reads", false, "check each file's SHA-256 against its commit record before any of it is sent (a read of altered data fails with DATA_LOSS); reads then bypass the --cache-dir cache (it is neither read nor filled)")
	f.StringVar(&c.compression, "compression", env("QUIVER_COMPRESSION", "zstd"), "compression of the Parquet files the server writes: zstd, lz4_raw, snappy or none (env QUIVER_COMPRESSION)")
	f.StringVar(&c.cacheDir, "cache-dir", env("QUIVER_CACHE_DIR", ""), "directory of an Arrow IPC cache of decoded files, outside the data directory: hot DoGets stream it without decoding Parquet (empty: no cache); it must be private to the server: whoever can write it can change what readers get; unused with --verify-reads (env QUIVER_CACHE_DIR)")
	f.StringVar(&c.cacheSize, "cache-size", env("QUIVER_CACHE_SIZE", "10GiB"), "most bytes the IPC cache holds; least recently used files are evicted (env QUIVER_CACHE_SIZE)")
	f.IntVar(&c.readAhead, "read-ahead", 0, "files a read decodes at once, ahead of sending (0: GOMAXPROCS)")
	f.DurationVar(&c.lockStale, "lock-stale-after", 10*time.Minute, "a manifest lock older than this is taken over even when its owner cannot be proven gone (another host)")
	f.DurationVar(&c.grace, "grace", flightserver.DefaultGrace, "default grace period of remove-old-versions")
	f.DurationVar(&c.stopTimeout, "stop-timeout", 30*time.Second, "on SIGTERM, how long in-flight RPCs may finish before they are cancelled")
	f.DurationVar(&c.lockTimeout, "lock-timeout", 10*time.Second, "how long a writer waits for a manifest lock (0: not at all)")
	f.DurationVar(&c.sweepEvery, "sweep-every", maint.DefaultStaleAfter, "sweep the data dir (what killed writers left: older than an hour, or a killed put's files at once) at start-up and then this often (0: at start-up only; at least 1s)")
	f.Int64Var(&c.endpointSize, "endpoint-bytes", 256<<20, "target size of one GetFlightInfo endpoint, bytes")
	f.StringVar(&c.authFile, "auth-file", env("QUIVER_AUTH_FILE", ""), "JSON file of users and tokens (docs/security.md); reloaded on SIGHUP (env QUIVER_AUTH_FILE)")
	f.BoolVar(&c.insecureNoAuth, "insecure-no-auth", false, "serve a non-loopback address without --auth-file (everyone is an anonymous admin)")
	f.DurationVar(&c.sessionTTL, "session-ttl", flightserver.DefaultSessionTTL, "how long a token from the basic-auth handshake is valid")
	f.StringVar(&c.tlsCert, "tls-cert", env("QUIVER_TLS_CERT", ""), "PEM certificate (chain) to serve TLS with (env QUIVER_TLS_CERT)")
	f.StringVar(&c.tlsKey, "tls-key", env("QUIVER_TLS_KEY", ""), "PEM private key of --tls-cert (env QUIVER_TLS_KEY)")
	f.StringVar(&c.tlsClientCA, "tls-client-ca", env("QUIVER_TLS_CLIENT_CA", ""), "PEM CA bundle: require client certificates signed by it (mutual TLS) (env QUIVER_TLS_CLIENT_CA)")
	f.StringVar(&c.metricsAddr, "metrics-addr", env("QUIVER_METRICS_ADDR", ""), "serve Prometheus /metrics and /healthz over HTTP on host:port (default off) (env QUIVER_METRICS_ADDR)")
	f.BoolVar(&c.pprof, "pprof", false, "with --metrics-addr: also serve Go's /debug/pprof/ profiles there (CPU, heap, goroutines); keep that address private")
	f.Uint32Var(&c.maxStreams, "max-concurrent-streams", flightserver.DefaultMaxConcurrentStreams, "RPCs one client connection may have open at once")
	f.DurationVar(&c.idleTimeout, "idle-timeout", flightserver.DefaultIdleTimeout, "cancel a DoPut/DoGet stream when no message moves for this long (0: never)")
	f.DurationVar(&c.connIdle, "max-connection-idle", flightserver.DefaultMaxConnectionIdle, "close a client connection that has had no RPC in progress for this long; clients reconnect on their next call (0: never)")
	f.IntVar(&c.maxConns, "max-connections", flightserver.DefaultMaxConnections, "client connections held at once; more wait in the listen backlog until one closes (0: no limit)")
	f.IntVar(&c.maxColumns, "max-columns", flightserver.DefaultMaxColumns, "most leaf columns a put's schema may have")
	f.IntVar(&c.maxDepth, "max-depth", flightserver.DefaultMaxDepth, "deepest nesting a put's schema may have (a top-level column is depth 1)")
	f.StringVar(&c.maxInflight, "max-inflight-bytes", env("QUIVER_MAX_INFLIGHT_BYTES", "512MiB"), "budget of inbound DoPut message bytes across all streams; each receive reserves --max-recv-msg-size while a message may be arriving, not while its client's connection is silent (0: no budget) (env QUIVER_MAX_INFLIGHT_BYTES)")
	f.DurationVar(&c.inflightWait, "inflight-wait", flightserver.DefaultInflightWait, "how long a receive waits for room in the in-flight budget before the RPC fails RESOURCE_EXHAUSTED")
	f.DurationVar(&c.sendTimeout, "send-timeout", flightserver.DefaultSendTimeout, "cancel a DoGet whose client accepts no message for this long (0: only --idle-timeout)")
	f.IntVar(&c.authChecks, "auth-checks", flightserver.DefaultPasswordLimits.Concurrent, "bcrypt password checks of basic-auth handshakes run at once")
	f.IntVar(&c.authQueue, "auth-queue", flightserver.DefaultPasswordLimits.Queue, "handshakes that may wait for a password check; more are refused RESOURCE_EXHAUSTED")
	f.Float64Var(&c.authRate, "auth-rate", flightserver.DefaultPasswordLimits.Rate, "password checks per second, server-wide (burst 2× this; 0: no limit)")
	f.Float64Var(&c.authRatePerIP, "auth-rate-per-ip", flightserver.DefaultPasswordLimits.PeerRate, "password checks per second per client IP (burst 2.5× this; 0: no limit)")
	f.DurationVar(&c.loginCacheTTL, "login-cache-ttl", flightserver.DefaultLoginCacheTTL, "remember a successful password check this long (forgotten on SIGHUP; 0: never)")
	return cmd
}

func newLogger(c serveConfig, stderr io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(c.logLevel))
	if err != nil || lvl == zerolog.NoLevel {
		return zerolog.Nop(), fmt.Errorf("--log-level %q: want debug, info, warn or error", c.logLevel)
	}
	var w io.Writer
	switch c.logFormat {
	case "json":
		w = stderr
	case "console":
		w = zerolog.ConsoleWriter{Out: stderr, TimeFormat: time.RFC3339}
	default:
		return zerolog.Nop(), fmt.Errorf("--log-format %q: want json or console", c.logFormat)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// minSweepEvery is the shortest --sweep-every: a sweep walks the whole
// data dir, and one back to back with the next kept a core busy (red team
// round 42's h08: 1ns was taken).
const minSweepEvery = time.Second

// storeOptions turns the serve flags that belong to the store into
// options.
func storeOptions(c serveConfig) ([]store.Option, error) {
	opts := []store.Option{store.WithMaxPutBytes(c.maxPutBytes), store.WithLockTimeout(c.lockTimeout),
		store.WithVerifyReads(c.verifyReads)}
	if c.lockStale <= 0 {
		return nil, errors.New("--lock-stale-after must be positive")
	}
	if c.lockTimeout < 0 {
		return nil, errors.New("--lock-timeout must not be negative")
	}
	if c.sweepEvery < 0 || c.sweepEvery > 0 && c.sweepEvery < minSweepEvery {
		return nil, fmt.Errorf("--sweep-every %s: want 0 (at start-up only) or at least %s", c.sweepEvery, minSweepEvery)
	}
	opts = append(opts, store.WithLockStaleAfter(c.lockStale))
	if c.groupAppend != "" {
		var n int64
		var err error
		if strings.TrimSpace(c.groupAppend) != "0" {
			n, err = parseBytes(c.groupAppend)
		}
		if err != nil {
			return nil, fmt.Errorf("--group-append-bytes %q: want a size such as 1MiB, or 0", c.groupAppend)
		}
		opts = append(opts, store.WithGroupAppendBytes(n))
	}
	if c.spillDir != "" {
		opts = append(opts, store.WithSpillDir(c.spillDir))
	}
	if c.putMemory != "" {
		n, err := parseBytes(c.putMemory)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--put-memory %q: want a size such as 256MiB", c.putMemory)
		}
		opts = append(opts, store.WithPutMemory(n))
	}
	if c.autoCompact < 0 {
		return nil, errors.New("--auto-compact must not be negative")
	}
	if c.autoCompact > 0 {
		small, err := parseBytes(c.compactSmall)
		if err != nil || small <= 0 {
			return nil, fmt.Errorf("--auto-compact-small %q: want a size such as 16MiB", c.compactSmall)
		}
		opts = append(opts, store.WithAutoCompact(store.AutoCompact{Files: c.autoCompact, SmallBytes: small}))
	}
	comp, err := codec.ParseCompression(c.compression)
	if err != nil {
		return nil, fmt.Errorf("--compression: %w", err)
	}
	opts = append(opts, store.WithCompression(comp))
	if c.readAhead < 0 {
		return nil, errors.New("--read-ahead must not be negative")
	}
	if c.readAhead > 0 {
		opts = append(opts, store.WithReadAhead(c.readAhead))
	}
	if c.signingKey != "" {
		b, err := os.ReadFile(c.signingKey)
		if err != nil {
			return nil, fmt.Errorf("--signing-key: %w", err)
		}
		key, err := store.ParseSigningKey(b)
		if err != nil {
			return nil, fmt.Errorf("--signing-key: %w", err)
		}
		opts = append(opts, store.WithSigningKey(key))
	}
	return opts, nil
}

// openCache opens the IPC cache of --cache-dir, which must lie outside
// the data directory (and not hold it).
func openCache(c serveConfig) (*ipccache.Cache, error) {
	size, err := parseBytes(c.cacheSize)
	if err != nil {
		return nil, fmt.Errorf("--cache-size: %w", err)
	}
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		if r, err := filepath.EvalSymlinks(a); err == nil {
			return r
		}
		return a
	}
	cd, dd := abs(c.cacheDir), abs(c.dataDir)
	within := func(a, b string) bool { // a is b or below it
		rel, err := filepath.Rel(b, a)
		return err == nil && (rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))))
	}
	if within(cd, dd) || within(dd, cd) {
		return nil, fmt.Errorf("--cache-dir %s: must lie outside the data directory %s (and not hold it)", c.cacheDir, c.dataDir)
	}
	cache, err := ipccache.Open(c.cacheDir, size)
	if err != nil {
		return nil, fmt.Errorf("--cache-dir %s: %w", c.cacheDir, err)
	}
	return cache, nil
}

func serve(ctx context.Context, c serveConfig, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	log, err := newLogger(c, stderr)
	if err != nil {
		return err
	}
	if c.maxRecv <= 0 || c.maxSend <= 0 {
		return errors.New("message size limits must be positive")
	}
	if c.pprof && c.metricsAddr == "" {
		return errors.New("--pprof needs --metrics-addr: profiles are served on that address")
	}
	limited := os.Getenv("GOMEMLIMIT") != ""
	switch c.memoryLimit {
	case "", "off", "none":
	case "auto":
		// Bounded memory by default (issue 14): unless the operator set
		// GOMEMLIMIT, the heap is kept near defaultMemoryLimit.
		if !limited {
			debug.SetMemoryLimit(defaultMemoryLimit)
			limited = true
		}
	default:
		n, err := parseBytes(c.memoryLimit)
		if err != nil {
			return fmt.Errorf("--memory-limit: %w", err)
		}
		debug.SetMemoryLimit(n)
		limited = true
	}
	if limited && os.Getenv("GOGC") == "" {
		// Under a limit, the collector need not run each time the heap
		// doubles: small appends keep little alive, and at GOGC's 100
		// their collections took a sixth of the server's CPU; at
		// limitedGCPercent, 32 writers' appends cost 13% less CPU each
		// (side by side), while a large put's heap is held by the limit
		// as before.
		debug.SetGCPercent(limitedGCPercent)
	}
	sopts, err := storeOptions(c)
	if err != nil {
		return err
	}
	fsOpts, err := storageOption(ctx, c.dataDir, c.storage, log)
	if err != nil {
		return err
	}
	sopts = append(sopts, fsOpts...)
	if c.cacheDir != "" {
		cache, err := openCache(c)
		if err != nil {
			return err
		}
		defer cache.Close()
		sopts = append(sopts, store.WithCache(cache))
		if c.verifyReads {
			log.Warn().Msg("--cache-dir is not used: with --verify-reads every read decodes the files it has just checked")
		}
	}
	st, err := store.Open(c.dataDir, append(sopts, store.WithLogger(log))...)
	if err != nil {
		return fmt.Errorf("open data dir %s: %w", c.dataDir, err)
	}
	defer func() {
		// After the RPCs: the work commits leave behind once their puts
		// are answered (releasing a lock kept between back-to-back
		// cycles, syncing an idle profile's release) ends before exit.
		if err := st.Close(); err != nil {
			log.Warn().Err(err).Msg("close the data dir")
		}
	}()
	// Clean what killed writers left behind (stale temps, uncommitted
	// orphans older than the threshold), at start-up and then every
	// --sweep-every, in the background so a large data dir does not delay
	// serving. It never touches a committed file. What a killed put left
	// in a version is a file pyrosome, pyarrow and DuckDB reading the
	// directory take for data (format.md "Visibility"): swept only at
	// start-up, it stayed as long as the server ran. The sweeps stop
	// before the store closes (deferred after its Close: run before it).
	sweepCtx, stopSweeps := context.WithCancel(ctx)
	sweepsDone := make(chan struct{})
	defer func() {
		stopSweeps()
		<-sweepsDone
	}()
	go func() {
		defer close(sweepsDone)
		sweep := func(what string) {
			rep, err := maint.Sweep(sweepCtx, st, maint.DefaultStaleAfter)
			switch {
			case err != nil && sweepCtx.Err() == nil:
				log.Warn().Err(err).Msg(what + " failed")
			case err == nil && len(rep.Removed)+len(rep.Settled)+len(rep.Skipped) > 0:
				log.Info().Int("removed", len(rep.Removed)).Strs("paths", rep.Removed).Strs("settled", rep.Settled).Int("skipped", len(rep.Skipped)).Msg(what)
			}
		}
		sweep("start-up sweep")
		if c.sweepEvery <= 0 {
			return
		}
		t := time.NewTicker(c.sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-sweepCtx.Done():
				return
			case <-t.C:
				sweep("sweep")
			}
		}
	}()
	sec, err := setupSecurity(c, log)
	if err != nil {
		return err
	}
	if c.maxStreams == 0 {
		return errors.New("--max-concurrent-streams must be positive")
	}
	limits, err := limitOptions(c)
	if err != nil {
		return err
	}
	srv := flightserver.New(st, append(append([]flightserver.Option{
		flightserver.WithLogger(log),
		flightserver.WithMaxRecvMsgSize(c.maxRecv),
		flightserver.WithMaxSendMsgSize(c.maxSend),
		flightserver.WithGrace(c.grace),
		flightserver.WithEndpointBytes(c.endpointSize),
		flightserver.WithMaxConcurrentStreams(c.maxStreams),
		flightserver.WithIdleTimeout(c.idleTimeout),
	}, limits...), sec.opts...)...)
	if err := checkExposure(c, sec, log, stderr); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.addr, err)
	}
	if c.metricsAddr != "" {
		stopMetrics, err := startMetrics(c.metricsAddr, c.pprof, srv, log, stdout)
		if err != nil {
			_ = lis.Close()
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			stopMetrics(sctx)
		}()
	}
	hupCtx, stopHUP := context.WithCancel(ctx)
	defer stopHUP()
	reloadOnHUP(hupCtx, sec, log)
	log.Info().Str("addr", lis.Addr().String()).Str("data_dir", st.Root()).Msg("serving")
	fmt.Fprintf(stdout, "quiver: serving %s on %s\n", st.Root(), lis.Addr())

	sigCtx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-sigCtx.Done():
	}
	stop() // a second signal kills the process the default way
	log.Info().Dur("timeout", c.stopTimeout).Msg("stopping: letting in-flight RPCs finish")
	tctx, cancel := context.WithTimeout(context.Background(), c.stopTimeout)
	defer cancel()
	if !srv.Stop(tctx) {
		log.Warn().Msg("stop timeout: in-flight RPCs cancelled; interrupted puts committed nothing")
	}
	if err := <-errc; err != nil {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}
