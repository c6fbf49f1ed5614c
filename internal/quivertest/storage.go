package quivertest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/quiverdb/quiver/internal/s3test"
)

// Storage is where a `quiver serve` keeps its data and what it needs to
// reach it.
type Storage struct {
	// Name is "local" or "s3" (for subtest names and reports).
	Name string
	// DataDir is the --data-dir: a directory or s3://bucket/prefix.
	DataDir string
	// Flags are the flags the server (and the offline admin commands)
	// need besides --data-dir (--s3-endpoint, --s3-path-style).
	Flags []string
	// Env is the environment they need besides the test's own (S3
	// credentials and region).
	Env []string
	// Dir is the local directory where the data's files lie, for tests
	// that look behind the server's back: DataDir itself, or on S3 the
	// directory versitygw's POSIX backend keeps the prefix's objects in
	// (an object's content is its file; metadata is not).
	Dir string
	// S3 is the server of an S3 storage (nil for local).
	S3 *s3test.Server
	// Bucket and Prefix locate the data on S3.
	Bucket, Prefix string
}

// Local is the storage of a local data directory.
func Local(dir string) Storage {
	return Storage{Name: "local", DataDir: dir, Dir: dir}
}

// S3 is a new, empty bucket on srv (data under the prefix "quiver/data").
func S3(tb testing.TB, srv *s3test.Server) Storage {
	tb.Helper()
	bucket, prefix := srv.NewBucket(tb), "quiver/data"
	return Storage{
		Name:    "s3",
		DataDir: "s3://" + bucket + "/" + prefix,
		Flags:   []string{"--s3-endpoint", srv.Endpoint, "--s3-path-style"},
		Env:     srv.Env(),
		Dir:     filepath.Join(srv.Dir, bucket, filepath.FromSlash(prefix)),
		S3:      srv,
		Bucket:  bucket,
		Prefix:  prefix,
	}
}

// StorageEnv names the environment variable that moves the suites that
// honour it (integration, Python) onto S3: QUIVER_TEST_STORAGE=s3.
const StorageEnv = "QUIVER_TEST_STORAGE"

// OnS3 reports whether QUIVER_TEST_STORAGE asks for S3.
func OnS3() bool { return strings.EqualFold(os.Getenv(StorageEnv), "s3") }

// FromEnv is a fresh storage for one test: a temp dir, or with
// QUIVER_TEST_STORAGE=s3 a new bucket on a versitygw started for the
// test.
func FromEnv(tb testing.TB) Storage {
	tb.Helper()
	if OnS3() {
		return S3(tb, s3test.Start(tb))
	}
	return Local(tb.TempDir())
}

// WriteFile writes data at name (slash-separated, relative to the data
// directory) behind the server's back: a file, or on S3 an object put
// through the S3 API (so that the service knows it).
func (st Storage) WriteFile(tb testing.TB, name string, data []byte) {
	tb.Helper()
	if st.S3 == nil {
		p := filepath.Join(st.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	key := st.Prefix + "/" + name
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.S3.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: &st.Bucket, Key: &key, Body: bytes.NewReader(data)}); err != nil {
		tb.Fatalf("put s3://%s/%s: %v", st.Bucket, key, err)
	}
}
