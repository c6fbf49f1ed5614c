// Package s3test starts a real S3 server for tests: versitygw (Apache-2.0,
// pinned at Version) with its POSIX backend on a temporary directory,
// listening on 127.0.0.1 at a free port with fixed test credentials.
//
// The binary is installed on first use with `go install` into the module's
// .tools/bin (gitignored; QUIVER_VERSITYGW names another binary), under a
// file lock so that test packages running at once install it once. When it
// cannot be installed or started the test is skipped — unless the
// environment has CI set (as CI systems do), where it fails: tests on S3
// are never skipped silently in CI.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sys/unix"

	"github.com/quiverdb/quiver/store/fsys/s3fs"
)

// The server every test gets.
const (
	// Version of versitygw installed and run.
	Version = "v1.8.0"
	// Module is versitygw's main package, for go install.
	Module = "github.com/versity/versitygw/cmd/versitygw"
	// AccessKey and SecretKey are the root account's credentials.
	AccessKey = "quiver-test-access"
	SecretKey = "quiver-test-secret-key"
	// Region is the server's region.
	Region = "us-east-1"
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is its URL, http://127.0.0.1:PORT (path-style addressing).
	Endpoint string
	// Dir is the directory its POSIX backend serves (one directory per
	// bucket).
	Dir string

	cmd    *exec.Cmd
	exited chan struct{}
	logs   *syncBuffer
	client *s3.Client
}

// Start starts a server that is stopped when tb's test ends. It skips the
// test if versitygw cannot be had, unless CI is set (then it fails).
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := Binary(tb)
	if err != nil {
		unavailable(tb, err)
	}
	s, err := start(tb, bin)
	if err != nil {
		unavailable(tb, err)
	}
	return s
}

func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("s3test: versitygw unavailable in CI: %v", err)
	}
	tb.Skipf("s3test: versitygw unavailable (CI=true makes this a failure): %v", err)
}

var installMu sync.Mutex

// Binary returns the path of versitygw Version, installing it into the
// module's .tools/bin if it is not there yet.
func Binary(tb testing.TB) (string, error) {
	if p := os.Getenv("QUIVER_VERSITYGW"); p != "" {
		return p, nil
	}
	installMu.Lock()
	defer installMu.Unlock()
	dir, err := toolsDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "versitygw-"+Version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".versitygw.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // another package installed it while we waited
	}
	tmp, err := os.MkdirTemp(dir, ".install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	tb.Logf("s3test: installing versitygw %s into %s (once; a few minutes)", Version, dir)
	cmd := exec.Command("go", "install", Module+"@"+Version)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %w\n%s", Module, Version, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "versitygw"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// toolsDir is $QUIVER_TOOLS_BIN or the module root's .tools/bin.
func toolsDir() (string, error) {
	if d := os.Getenv("QUIVER_TOOLS_BIN"); d != "" {
		return d, nil
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module")
	}
	return filepath.Join(filepath.Dir(mod), ".tools", "bin"), nil
}

func start(tb testing.TB, bin string) (*Server, error) {
	root := tb.TempDir()
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		args := []string{"--port", "127.0.0.1:" + port, "--access", AccessKey, "--secret", SecretKey, "--region", Region, "--quiet", "posix"}
		if !xattrsWork(data) {
			side := filepath.Join(root, "meta")
			if err := os.MkdirAll(side, 0o755); err != nil {
				return nil, err
			}
			args = append(args, "--sidecar", side)
		}
		args = append(args, data)
		s := &Server{Endpoint: "http://127.0.0.1:" + port, Dir: data, exited: make(chan struct{}), logs: &syncBuffer{}}
		s.cmd = exec.Command(bin, args...)
		s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
		s.cmd.SysProcAttr = childAttr()
		if err := s.cmd.Start(); err != nil {
			return nil, fmt.Errorf("start versitygw: %w", err)
		}
		go func() { _ = s.cmd.Wait(); close(s.exited) }()
		if err := s.waitReady(15 * time.Second); err != nil {
			s.stop()
			lastErr = fmt.Errorf("%w; its output:\n%s", err, s.logs.String())
			continue // most likely the port was taken meanwhile
		}
		s.client = s3.New(s3.Options{
			BaseEndpoint: aws.String(s.Endpoint),
			UsePathStyle: true,
			Region:       Region,
			Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		})
		tb.Cleanup(func() {
			s.stop()
			if tb.Failed() {
				tb.Logf("s3test: versitygw output:\n%s", s.logs.String())
			}
		})
		return s, nil
	}
	return nil, lastErr
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before versitygw binds it; start then tries another.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// xattrsWork reports whether dir's file system takes user xattrs, where
// versitygw keeps object metadata unless given a sidecar directory.
func xattrsWork(dir string) bool {
	p := filepath.Join(dir, ".xattr-probe")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		return false
	}
	defer os.Remove(p)
	return unix.Setxattr(p, "user.quiver-probe", []byte("1"), 0) == nil
}

// waitReady waits until the port answers as versitygw (not some other
// process that got the port first).
func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	hc := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return errors.New("versitygw exited at start")
		default:
		}
		resp, err := hc.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			if !strings.Contains(strings.ToUpper(resp.Header.Get("Server")), "VERSITYGW") {
				return fmt.Errorf("another server (%q) answers on %s", resp.Header.Get("Server"), s.Endpoint)
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("versitygw not answering on %s after %s", s.Endpoint, limit)
}

func (s *Server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

var bucketSeq atomic.Int64

// NewBucket creates an empty bucket with a fresh name and returns it.
func (s *Server) NewBucket(tb testing.TB) string {
	tb.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := fmt.Sprintf("qt-%d-%s", bucketSeq.Add(1), hex.EncodeToString(b[:]))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		tb.Fatalf("s3test: create bucket: %v", err)
	}
	return name
}

// Config is the s3fs configuration of bucket/prefix on this server.
func (s *Server) Config(bucket, prefix string) s3fs.Config {
	return s3fs.Config{
		Bucket:      bucket,
		Prefix:      prefix,
		Endpoint:    s.Endpoint,
		PathStyle:   true,
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	}
}

// FS returns an s3fs.FS over a new bucket (under the key prefix "data",
// so that the prefix is exercised), with cfg's changes applied.
func (s *Server) FS(tb testing.TB, edit ...func(*s3fs.Config)) *s3fs.FS {
	tb.Helper()
	cfg := s.Config(s.NewBucket(tb), "data")
	for _, e := range edit {
		e(&cfg)
	}
	f, err := s3fs.New(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("s3test: %v", err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// Client is an S3 client with the server's root credentials, for tests
// that look at the bucket behind an FS's back.
func (s *Server) Client() *s3.Client { return s.client }

// Env is the environment a child process (quiver serve) needs to reach
// the server with the AWS SDK's standard chain: credentials and region,
// and no EC2 metadata lookups.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_REGION=" + Region,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Logs is what versitygw printed so far.
func (s *Server) Logs() string { return s.logs.String() }

// Kill stops the server at once (SIGKILL), for tests of an unreachable
// store.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// syncBuffer is a bytes.Buffer safe for the child's two output streams.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.Len() > 1<<20 {
		return len(p), nil // enough to debug with
	}
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
