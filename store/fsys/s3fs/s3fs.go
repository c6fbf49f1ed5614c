package s3fs

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"

	"github.com/quiverdb/quiver/store/fsys"
)

// Sizes and limits.
const (
	// DefaultPartSize is the part size of multipart uploads: a Writer
	// holds at most two parts in memory (one filling, one uploading).
	DefaultPartSize = 8 << 20
	// MinPartSize is S3's smallest part (but the last).
	MinPartSize = 5 << 20
	// DefaultReadAhead is the size of the window a File fetches on a small
	// read (and of the tail fetched by Open).
	DefaultReadAhead = 1 << 20
	// DefaultMaxAttempts is how often a request is tried before its error
	// is returned (throttling, 5xx, dropped connections).
	DefaultMaxAttempts = 6

	// writeIDKey is the user metadata (x-amz-meta-quiver-write-id) that
	// marks each conditional write with a random id, so that a retry that
	// finds the object present can tell its own earlier attempt (which
	// landed although its answer was lost) from another writer's.
	writeIDKey = "quiver-write-id"
	// cacheBlocks is how many read-ahead windows a File keeps.
	cacheBlocks = 4
	// responseTimeout bounds the wait for a response's headers once the
	// request is sent (a part upload's body included).
	responseTimeout = time.Minute
)

// uploadAgeCheck: an upload older than this is dated by its newest part
// (ListParts) rather than its start, so that a long write does not look
// abandoned. A variable for tests.
var uploadAgeCheck = time.Minute

// Config says which bucket and prefix hold the data directory and how to
// reach the service. Credentials come from the AWS SDK's standard chain
// (environment, shared config and credentials files, SSO, web identity,
// ECS/EC2 roles) unless Credentials is set.
type Config struct {
	// Bucket is the bucket's name (required).
	Bucket string
	// Prefix is the key prefix of the data directory ("" for the whole
	// bucket; slashes at either end are ignored).
	Prefix string
	// Endpoint is the service's URL for S3-compatible servers
	// (https://minio.example:9000); empty for AWS.
	Endpoint string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key)
	// rather than the host name (bucket.endpoint/key); most S3-compatible
	// servers need it.
	PathStyle bool
	// Region; empty: the SDK's (AWS_REGION, config file), else us-east-1.
	Region string
	// Credentials replaces the standard chain (tests).
	Credentials aws.CredentialsProvider
	// PartSize of multipart uploads (default DefaultPartSize, at least
	// MinPartSize).
	PartSize int64
	// ReadAhead is the window of small reads (default DefaultReadAhead).
	ReadAhead int64
	// MaxAttempts per request (default DefaultMaxAttempts).
	MaxAttempts int
	// NoConditionalComplete is for services that cannot make
	// CompleteMultipartUpload conditional (If-None-Match: *; see Probe).
	// Commit then checks with HEAD that the name is free and completes
	// unconditionally: two Commits racing for one name may both succeed,
	// the later replacing the earlier. Quiver's store is safe with it
	// because every data file name is claimed first (an exclusive claim
	// marker or a version directory's Mkdir), but other users are not.
	NoConditionalComplete bool
	// HTTPClient sends the requests (nil: the SDK's default), for tests
	// and proxies.
	HTTPClient aws.HTTPClient
	// ClientOptions change the SDK client's options last (middleware for
	// tests, settings this Config does not cover).
	ClientOptions []func(*s3.Options)
	// HideUploads leaves in-progress multipart uploads out of List (one
	// request less per List). By default List shows each as a hidden temp
	// (".<name>.upload-<id>.tmp", dated by its newest part), so that sweep
	// sees live writes and can abort abandoned ones (Delete of that name
	// aborts the upload).
	HideUploads bool
}

// FS is an fsys.FS over a bucket and key prefix of S3 or an S3-compatible
// service. See the package documentation for how each operation maps to
// requests. It is safe for concurrent use.
type FS struct {
	client      *s3.Client
	bucket      string
	prefix      string // "" or "p/q/"
	partSize    int64
	readAhead   int64
	maxAttempts int
	noCondDone  bool
	hideUploads bool
	redact      []string // never in an error's text: bucket, prefix, endpoint host
	closed      atomic.Bool
	retryable   retry.IsErrorRetryables
}

// IsURL reports whether a --data-dir names an S3 location (s3://…).
func IsURL(s string) bool { return strings.HasPrefix(s, "s3://") }

// ParseURL splits s3://bucket/prefix into its bucket and prefix (without
// slashes at either end). The prefix must be a clean relative path.
func ParseURL(s string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%w: %q does not start with s3://", ErrBadURL, s)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.TrimRight(prefix, "/")
	if !validBucket(bucket) {
		return "", "", fmt.Errorf("%w: bucket name %q", ErrBadURL, bucket)
	}
	if prefix != "" && !fsys.ValidName(prefix) {
		return "", "", fmt.Errorf("%w: prefix %q is not a clean relative path", ErrBadURL, prefix)
	}
	return bucket, prefix, nil
}

// validBucket accepts S3 bucket names (3–63 lower-case letters, digits,
// dots and hyphens), loosely: the service has the last word.
func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// New returns the FS of cfg. It makes no request (see Probe).
func New(ctx context.Context, cfg Config) (*FS, error) {
	if !validBucket(cfg.Bucket) {
		return nil, fmt.Errorf("%w: bucket name %q", ErrBadURL, cfg.Bucket)
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" && !fsys.ValidName(prefix) {
		return nil, fmt.Errorf("%w: prefix %q is not a clean relative path", ErrBadURL, cfg.Prefix)
	}
	f := &FS{
		bucket:      cfg.Bucket,
		partSize:    cfg.PartSize,
		readAhead:   cfg.ReadAhead,
		maxAttempts: cfg.MaxAttempts,
		noCondDone:  cfg.NoConditionalComplete,
		hideUploads: cfg.HideUploads,
		retryable:   retry.IsErrorRetryables(retry.DefaultRetryables),
	}
	if prefix != "" {
		f.prefix = prefix + "/"
	}
	if f.partSize == 0 {
		f.partSize = DefaultPartSize
	}
	if f.partSize < MinPartSize {
		return nil, fmt.Errorf("s3fs: part size %d is below S3's minimum of %d", f.partSize, MinPartSize)
	}
	if f.readAhead <= 0 {
		f.readAhead = DefaultReadAhead
	}
	if f.maxAttempts <= 0 {
		f.maxAttempts = DefaultMaxAttempts
	}
	f.redact = []string{cfg.Bucket}
	if prefix != "" {
		f.redact = append(f.redact, prefix)
	}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, errors.New("s3fs: endpoint is not an http(s) URL")
		}
		f.redact = append(f.redact, u.Host, u.Hostname())
	}
	opts := []func(*config.LoadOptions) error{
		config.WithLogger(logging.Nop{}),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = f.maxAttempts
				o.MaxBackoff = 2 * time.Second
				// Many writers polling one lock would drain the default
				// retry token bucket and then fail requests outright.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(cfg.Credentials))
	}
	if cfg.HTTPClient == nil {
		opts = append(opts, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			// A request the service never answers fails (and is retried)
			// rather than hanging a commit that holds the manifest lock.
			tr.ResponseHeaderTimeout = responseTimeout
			// Many concurrent requests go to one host.
			tr.MaxIdleConnsPerHost = 100
		})))
	}

	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3fs: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	f.client = s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		if cfg.HTTPClient != nil {
			o.HTTPClient = cfg.HTTPClient
		}
		for _, fn := range cfg.ClientOptions {
			fn(o)
		}
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return f, nil
}

// Close makes later calls fail with ErrClosed. Writers and Files already
// open keep working.
func (f *FS) Close() error {
	f.closed.Store(true)
	return nil
}

// Bucket and Prefix say where the FS is, for the operator's logs (never
// for clients).
func (f *FS) Bucket() string { return f.bucket }

// Prefix is the key prefix, without its trailing slash.
func (f *FS) Prefix() string { return strings.TrimSuffix(f.prefix, "/") }

var errBadName = fmt.Errorf("%w: not a clean relative name", fsys.ErrUnsafePath)

// begin checks ctx and the name before any request.
func (f *FS) begin(ctx context.Context, validName bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validName {
		return errBadName
	}
	if f.closed.Load() {
		return ErrClosed
	}
	return nil
}

func (f *FS) key(name string) string { return f.prefix + name }

// dirPrefix is the key prefix of the objects under dir ("" is the root).
func (f *FS) dirPrefix(dir string) string {
	if dir == "" {
		return f.prefix
	}
	return f.prefix + dir + "/"
}

func (f *FS) clean(err error) error { return clean(err, f.redact...) }

// cleanHead is clean for a HEAD's error (cleanHead).
func (f *FS) cleanHead(err error) error { return cleanHead(err, f.redact...) }

// noRetry turns the SDK's retries off for one request: conditional
// writes retry in conditional, which knows what a retry means.
func noRetry(o *s3.Options) { o.RetryMaxAttempts = 1 }

func newWriteID() string {
	var b [16]byte
	_, _ = cryptoRead(b[:])
	return hex.EncodeToString(b[:])
}

var cryptoRead = crand.Read

// conditional runs one conditional write (send), retrying what may be
// retried. A retry after an attempt whose outcome is unknown (no answer, a
// 5xx) may find the condition failed because that attempt did land; the
// write id in the object's metadata tells, so the caller gets success
// rather than a false ErrExist/ErrPrecondition. Once an attempt went
// unanswered, no later answer but success tells what became of it (a
// refusal of the retry, a timeout of the context): unless the object is
// seen to be this write's (success) or another's (the last answer), the
// error is one of unknown outcome (fsys.ErrUnavailable, whatever the last
// answer was: red team round 49's p04, where a refused retry was taken for
// "nothing written"). The error is cleaned.
func (f *FS) conditional(ctx context.Context, key, id string, send func(context.Context) error) error {
	uncertain := false
	settle := func(err error) error {
		if !uncertain {
			return err
		}
		lctx := ctx
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			lctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), responseTimeout)
			defer cancel()
		}
		switch f.landed(lctx, key, id) {
		case writtenHere:
			return nil
		case writtenElse:
			return err
		}
		return &unknownError{err: err}
	}
	for attempt := 1; ; attempt++ {
		raw := send(ctx)
		if raw == nil {
			return nil
		}
		err := f.clean(raw)
		switch {
		case ctx.Err() != nil:
			return settle(ctx.Err())
		case errors.Is(err, fsys.ErrPrecondition), errors.Is(err, fsys.ErrNotExist):
			return settle(err)
		case errors.Is(err, errConflict):
			// Refused, nothing written: try again.
		case f.retryable.IsErrorRetryable(raw) == aws.TrueTernary:
			uncertain = true
		default:
			return settle(err)
		}
		if attempt >= f.maxAttempts {
			return settle(err)
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return settle(err)
		}
	}
}

// What landed found at a key.
const (
	writtenUnknown = iota // no answer, or nothing there yet (a request may still land)
	writtenHere           // the object of this write (its id)
	writtenElse           // another write's object
)

// landed tells whether key is the object written with id.
func (f *FS) landed(ctx context.Context, key, id string) int {
	out, err := f.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &f.bucket, Key: &key})
	switch {
	case err != nil:
		return writtenUnknown
	case out.Metadata[writeIDKey] == id:
		return writtenHere
	}
	return writtenElse
}

// unknownError is a conditional write's error when an attempt went
// unanswered and nothing since told what became of it: the object may
// have been written, or be written yet (a request the service takes
// late). It matches fsys.ErrUnavailable only.
type unknownError struct{ err error }

func (e *unknownError) Error() string {
	return "whether it was written is unknown (an attempt got no answer): " + e.err.Error()
}

func (e *unknownError) Unwrap() error { return fsys.ErrUnavailable }

func backoff(attempt int) time.Duration {
	d := 25 * time.Millisecond << min(attempt, 6)
	d = min(d, time.Second)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// put writes key with data if it does not exist (ifMatch "") or if its
// ETag is ifMatch.
func (f *FS) put(ctx context.Context, key string, data []byte, ifMatch fsys.Token) error {
	id := newWriteID()
	return f.conditional(ctx, key, id, func(ctx context.Context) error {
		in := &s3.PutObjectInput{
			Bucket:        &f.bucket,
			Key:           &key,
			Body:          bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))),
			Metadata:      map[string]string{writeIDKey: id},
		}
		if ifMatch == "" {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(string(ifMatch))
		}
		_, err := f.client.PutObject(ctx, in, noRetry)
		return err
	})
}

// CreateExclusive implements fsys.FS: PutObject with If-None-Match: *.
func (f *FS) CreateExclusive(ctx context.Context, name string, data []byte) error {
	const op = "create"
	if err := f.begin(ctx, fsys.ValidName(name)); err != nil {
		return pathErr(op, name, err)
	}
	err := exists(f.put(ctx, f.key(name), data, ""))
	if err != nil {
		return pathErr(op, name, err)
	}
	return nil
}

// ReadFile implements fsys.FS; the Token is the object's ETag.
func (f *FS) ReadFile(ctx context.Context, name string) ([]byte, fsys.Token, error) {
	const op = "read"
	if err := f.begin(ctx, fsys.ValidName(name)); err != nil {
		return nil, "", pathErr(op, name, err)
	}
	key := f.key(name)
	var (
		buf bytes.Buffer
		tok fsys.Token
	)
	err := f.get(ctx, &s3.GetObjectInput{Bucket: &f.bucket, Key: &key}, func(out *s3.GetObjectOutput) error {
		buf.Reset()
		n := aws.ToInt64(out.ContentLength)
		if n > fsys.MaxReadFile {
			return fmt.Errorf("%w: %d bytes, more than %d", fsys.ErrTooLarge, n, fsys.MaxReadFile)
		}
		if n > 0 {
			buf.Grow(int(n))
		}
		tok = fsys.Token(aws.ToString(out.ETag))
		if _, err := buf.ReadFrom(io.LimitReader(out.Body, fsys.MaxReadFile+1)); err != nil {
			return err
		}
		if buf.Len() > fsys.MaxReadFile {
			return fmt.Errorf("%w: more than %d bytes", fsys.ErrTooLarge, fsys.MaxReadFile)
		}
		return nil
	})
	if err != nil {
		return nil, "", pathErr(op, name, err)
	}
	return buf.Bytes(), tok, nil
}

// get sends a GET and reads its answer with read, sending it again when
// the body breaks off (the SDK retries a request only until its headers
// arrive). The error is cleaned.
func (f *FS) get(ctx context.Context, in *s3.GetObjectInput, read func(*s3.GetObjectOutput) error) error {
	for attempt := 1; ; attempt++ {
		out, err := f.client.GetObject(ctx, in)
		if err != nil {
			return f.clean(err)
		}
		err = read(out)
		out.Body.Close()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case attempt >= f.maxAttempts || !errors.Is(err, io.ErrUnexpectedEOF) && f.retryable.IsErrorRetryable(err) != aws.TrueTernary:
			return f.clean(err)
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return err
		}
	}
}

// Replace implements fsys.FS: PutObject with If-Match: <ETag>, or
// If-None-Match: * for the empty Token.
func (f *FS) Replace(ctx context.Context, name string, data []byte, ifMatch fsys.Token) error {
	const op = "replace"
	if err := f.begin(ctx, fsys.ValidName(name)); err != nil {
		return pathErr(op, name, err)
	}
	err := f.put(ctx, f.key(name), data, ifMatch)
	if errors.Is(err, fsys.ErrNotExist) { // If-Match on a missing object
		err = fsys.ErrPrecondition
	}
	if err != nil {
		return pathErr(op, name, err)
	}
	return nil
}

// Stat implements fsys.FS: HEAD for an object, else a one-key listing of
// the prefix name/ for a directory (dated by its Mkdir marker, if any).
func (f *FS) Stat(ctx context.Context, name string) (fsys.Entry, error) {
	const op = "stat"
	if err := f.begin(ctx, fsys.ValidName(name)); err != nil {
		return fsys.Entry{}, pathErr(op, name, err)
	}
	key := f.key(name)
	out, err := f.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &f.bucket, Key: &key})
	if err == nil {
		return fsys.Entry{Name: name, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
	}
	if err = f.cleanHead(err); !errors.Is(err, fsys.ErrNotExist) {
		return fsys.Entry{}, pathErr(op, name, err)
	}
	dir := key + "/"
	lo, err := f.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &f.bucket, Prefix: &dir, MaxKeys: aws.Int32(1)})
	if err != nil {
		return fsys.Entry{}, pathErr(op, name, f.clean(err))
	}
	if len(lo.Contents) == 0 {
		return fsys.Entry{}, pathErr(op, name, fsys.ErrNotExist)
	}
	e := fsys.Entry{Name: name, Dir: true}
	if first := lo.Contents[0]; aws.ToString(first.Key) == dir {
		e.ModTime = aws.ToTime(first.LastModified)
	}
	return e, nil
}

// List implements fsys.FS: ListObjectsV2 with the delimiter "/" (common
// prefixes are directories), Mkdir markers left out, and (unless
// Config.HideUploads) in-progress uploads as hidden temps.
func (f *FS) List(ctx context.Context, dir string) ([]fsys.Entry, error) {
	const op = "list"
	if err := f.begin(ctx, dir == "" || fsys.ValidName(dir)); err != nil {
		return nil, pathErr(op, dir, err)
	}
	prefix := f.dirPrefix(dir)
	var (
		entries []fsys.Entry
		found   bool // anything at all under the prefix, the marker included
	)
	p := s3.NewListObjectsV2Paginator(f.client, &s3.ListObjectsV2Input{Bucket: &f.bucket, Prefix: &prefix, Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, pathErr(op, dir, f.clean(err))
		}
		for _, o := range page.Contents {
			found = true
			base := strings.TrimPrefix(aws.ToString(o.Key), prefix)
			if base == "" || !validBase(base) {
				continue // the directory's own Mkdir marker (or a name no FS call can reach)
			}
			entries = append(entries, fsys.Entry{Name: base, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
		for _, cp := range page.CommonPrefixes {
			found = true
			base := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), prefix), "/")
			if validBase(base) {
				entries = append(entries, fsys.Entry{Name: base, Dir: true})
			}
		}
	}
	if !f.hideUploads {
		ups, dirs, err := f.uploads(ctx, prefix, "/")
		if err != nil {
			return nil, pathErr(op, dir, err)
		}
		for _, u := range ups {
			found = true
			t, err := f.uploadTime(ctx, u)
			if err != nil {
				return nil, pathErr(op, dir, err)
			}
			entries = append(entries, fsys.Entry{Name: uploadTempName(strings.TrimPrefix(u.key, prefix), u.id), ModTime: t})
		}
		for _, d := range dirs {
			found = true
			base := strings.TrimSuffix(strings.TrimPrefix(d, prefix), "/")
			if validBase(base) && !slices.ContainsFunc(entries, func(e fsys.Entry) bool { return e.Dir && e.Name == base }) {
				entries = append(entries, fsys.Entry{Name: base, Dir: true})
			}
		}
	}
	if !found {
		return nil, pathErr(op, dir, fsys.ErrNotExist)
	}
	slices.SortStableFunc(entries, func(a, b fsys.Entry) int { return strings.Compare(a.Name, b.Name) })
	return entries, nil
}

// validBase reports whether one element of a key is a name element an FS
// call could have made.
func validBase(base string) bool { return !strings.Contains(base, "/") && fsys.ValidName(base) }

// Mkdir implements fsys.FS: ErrExist if an object or anything under
// name/ exists, else a zero-byte marker object "name/" created with
// If-None-Match: * (of racing Mkdirs exactly one wins). List hides
// markers.
func (f *FS) Mkdir(ctx context.Context, name string) error {
	const op = "mkdir"
	if err := f.begin(ctx, fsys.ValidName(name)); err != nil {
		return pathErr(op, name, err)
	}
	key := f.key(name)
	_, err := f.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &f.bucket, Key: &key})
	if err == nil {
		return pathErr(op, name, fsys.ErrExist)
	}
	if err = f.cleanHead(err); !errors.Is(err, fsys.ErrNotExist) {
		return pathErr(op, name, err)
	}
	dir := key + "/"
	lo, err := f.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &f.bucket, Prefix: &dir, MaxKeys: aws.Int32(1)})
	if err != nil {
		return pathErr(op, name, f.clean(err))
	}
	if len(lo.Contents) > 0 {
		return pathErr(op, name, fsys.ErrExist)
	}
	err = f.put(ctx, dir, nil, "")
	if errors.Is(err, fsys.ErrPrecondition) {
		err = fsys.ErrExist
	}
	if err != nil {
		return pathErr(op, name, err)
	}
	return nil
}

// Delete implements fsys.FS: one DeleteObjects of name and of the marker
// name/ (so an empty directory made by Mkdir goes too, as on local
// disks); the hidden temp of an upload aborts that upload.
func (f *FS) Delete(ctx context.Context, name string) error {
	const op = "delete"
	if err := f.begin(ctx, fsys.ValidName(name)); err != nil {
		return pathErr(op, name, err)
	}
	if dir, base := split(name); fsys.IsTemp(base) {
		if target, id, ok := parseUploadTemp(base); ok {
			if err := f.abort(ctx, f.key(join(dir, target)), id); err != nil {
				return pathErr(op, name, err)
			}
			return nil
		}
	}
	key := f.key(name)
	if err := f.deleteKeys(ctx, []string{key, key + "/"}, key+"/"); err != nil {
		return pathErr(op, name, err)
	}
	return nil
}

var _ fsys.ConditionalDeleter = (*FS)(nil)

// DeleteIfMatch deletes name only if its ETag is tok (DeleteObject with
// If-Match), else fails with fsys.ErrPrecondition; a missing object is
// not an error. It implements fsys.ConditionalDeleter: the store releases
// its manifest lock with it, so that a lock taken over between the
// release's read and its delete stays. Probe reports whether the
// service honours it (Support.ConditionalDelete).
func (f *FS) DeleteIfMatch(ctx context.Context, name string, tok fsys.Token) error {
	const op = "delete"
	if err := f.begin(ctx, fsys.ValidName(name)); err != nil {
		return pathErr(op, name, err)
	}
	if tok == "" {
		return pathErr(op, name, errors.New("no token to match"))
	}
	key := f.key(name)
	_, err := f.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &f.bucket, Key: &key, IfMatch: aws.String(string(tok))})
	if err = f.clean(err); err != nil && !errors.Is(err, fsys.ErrNotExist) {
		return pathErr(op, name, err)
	}
	return nil
}

// deleteKeys deletes up to 1000 keys in one request. Failures to delete
// the key lenient (a directory marker) are ignored.
func (f *FS) deleteKeys(ctx context.Context, keys []string, lenient string) error {
	if len(keys) == 0 {
		return nil
	}
	ids := make([]types.ObjectIdentifier, len(keys))
	for i := range keys {
		ids[i] = types.ObjectIdentifier{Key: &keys[i]}
	}
	out, err := f.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: &f.bucket,
		Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
	})
	if err != nil {
		return f.clean(err)
	}
	for _, e := range out.Errors {
		if k := aws.ToString(e.Key); k == lenient || aws.ToString(e.Code) == "NoSuchKey" {
			continue
		}
		return &serviceError{code: aws.ToString(e.Code), msg: redactAll(aws.ToString(e.Message), f.redact)}
	}
	return nil
}

// DeleteAll implements fsys.FS: every key under dir/ (and dir itself),
// listed without a delimiter and deleted in batches of 1000, markers
// last, deepest first; in-progress uploads under dir/ are aborted.
func (f *FS) DeleteAll(ctx context.Context, dir string) error {
	const op = "delete all"
	if err := f.begin(ctx, fsys.ValidName(dir)); err != nil {
		return pathErr(op, dir, err)
	}
	prefix := f.dirPrefix(dir)
	batch := []string{f.key(dir)}
	var markers []string
	p := s3.NewListObjectsV2Paginator(f.client, &s3.ListObjectsV2Input{Bucket: &f.bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return pathErr(op, dir, f.clean(err))
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if strings.HasSuffix(k, "/") {
				markers = append(markers, k)
				continue
			}
			batch = append(batch, k)
			if len(batch) == 1000 {
				if err := f.deleteKeys(ctx, batch, ""); err != nil {
					return pathErr(op, dir, err)
				}
				batch = batch[:0]
			}
		}
	}
	if err := f.deleteKeys(ctx, batch, ""); err != nil {
		return pathErr(op, dir, err)
	}
	slices.Sort(markers)
	slices.Reverse(markers)
	for chunk := range slices.Chunk(markers, 1000) {
		if err := f.deleteKeys(ctx, chunk, ""); err != nil {
			return pathErr(op, dir, err)
		}
	}
	// Uploads are aborted, then listed again: a part that was arriving
	// while its upload was aborted can bring the upload back on some
	// servers (versitygw does), so a few rounds make sure none is left.
	for round := 0; ; round++ {
		ups, _, err := f.uploads(ctx, prefix, "")
		if err != nil {
			return pathErr(op, dir, err)
		}
		if len(ups) == 0 {
			return nil
		}
		for _, u := range ups {
			if err := f.abort(ctx, u.key, u.id); err != nil {
				return pathErr(op, dir, err)
			}
		}
		if round == 3 {
			return nil
		}
		if err := sleepCtx(ctx, time.Duration(round+1)*20*time.Millisecond); err != nil {
			return pathErr(op, dir, err)
		}
	}
}

// split cuts name into its directory ("" for the root) and base.
func split(name string) (dir, base string) {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

func join(dir, base string) string {
	if dir == "" {
		return base
	}
	return dir + "/" + base
}

// readAllCtx reads r to the end; the request's ctx bounds it.
func readAll(r io.Reader, n int64) ([]byte, error) {
	if n < 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, n)
	k, err := io.ReadFull(r, b)
	if err == io.ErrUnexpectedEOF || err == io.EOF && n > 0 {
		return b[:k], io.ErrUnexpectedEOF
	}
	return b[:k], err
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
