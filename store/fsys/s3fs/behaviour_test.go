package s3fs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/quiverdb/quiver/internal/s3test"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/s3fs"
)

// hook is an HTTP client that lets a test see and change each request
// and response on the way to the real server.
type hook struct {
	inner  aws.HTTPClient
	mu     sync.Mutex
	before func(*http.Request)
	// after may replace the response or error (drop an answer).
	after func(*http.Request, *http.Response, error) (*http.Response, error)
	// instead, when it answers, answers in the server's place (the
	// request is not sent).
	instead func(*http.Request) *http.Response
	count   map[string]int // "METHOD kind", kind from classify
}

func newHook() *hook { return &hook{inner: awshttp.NewBuildableClient(), count: map[string]int{}} }

func (h *hook) Do(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	before, after, instead := h.before, h.after, h.instead
	h.count[kind(r)]++
	h.mu.Unlock()
	if before != nil {
		before(r)
	}
	if instead != nil {
		if resp := instead(r); resp != nil {
			return resp, nil
		}
	}
	resp, err := h.inner.Do(r)
	if after != nil {
		return after(r, resp, err)
	}
	return resp, err
}

func (h *hook) counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.count {
		out[k] = v
	}
	clear(h.count)
	return out
}

// kind names a request: "GET range", "PUT part", "POST complete", …
func kind(r *http.Request) string {
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && r.Header.Get("Range") != "":
		return "GET range"
	case r.Method == http.MethodGet && q.Has("uploadId"):
		return "GET parts"
	case r.Method == http.MethodGet && q.Has("uploads"):
		return "GET uploads"
	case r.Method == http.MethodGet && q.Has("list-type"):
		return "GET list"
	case r.Method == http.MethodPut && q.Has("partNumber"):
		return "PUT part"
	case r.Method == http.MethodPost && q.Has("uploadId"):
		return "POST complete"
	case r.Method == http.MethodPost && q.Has("uploads"):
		return "POST create upload"
	case r.Method == http.MethodPost && q.Has("delete"):
		return "POST delete"
	}
	return r.Method
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13) + seed
	}
	return b
}

func withHook(h *hook) func(*s3fs.Config) {
	return func(c *s3fs.Config) { c.HTTPClient = h }
}

func smallParts(c *s3fs.Config) { c.PartSize = s3fs.MinPartSize }

func write(ctx context.Context, f fsys.FS, name string, data []byte, chunk int) (fsys.Writer, error) {
	w, err := f.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	for len(data) > 0 {
		k := min(chunk, len(data))
		if _, err := w.Write(data[:k]); err != nil {
			return w, err
		}
		data = data[k:]
	}
	return w, nil
}

// TestMultipart: an object larger than a part goes up in parts, while
// the writer holds at most two; it stays invisible (but listed as an
// upload) until Commit.
func TestMultipart(t *testing.T) {
	srv := s3test.Start(t)
	h := newHook()
	f := srv.FS(t, withHook(h), smallParts)
	ctx := t.Context()
	data := pattern(3*s3fs.MinPartSize+12345, 7)
	w, err := f.Create(ctx, "d/big.parquet")
	if err != nil {
		t.Fatal(err)
	}
	// Memory stays within two parts however much is written.
	peak := int64(0)
	for rest := data; len(rest) > 0; {
		k := min(100_000, len(rest))
		if _, err := w.Write(rest[:k]); err != nil {
			t.Fatal(err)
		}
		rest = rest[k:]
		peak = max(peak, w.(interface{ Buffered() int64 }).Buffered())
	}
	if peak > 2*s3fs.MinPartSize || peak < s3fs.MinPartSize {
		t.Errorf("writer held up to %d bytes; want between one and two parts (%d)", peak, s3fs.MinPartSize)
	}
	if _, err := f.Stat(ctx, "d/big.parquet"); !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("Stat before Commit: %v, want ErrNotExist", err)
	}
	// The upload shows as a hidden temp of d.
	entries, err := f.List(ctx, "d")
	if err != nil || len(entries) != 1 || !fsys.IsTemp(entries[0].Name) || entries[0].ModTime.IsZero() {
		t.Errorf("List(d) while writing = %+v, %v; want one dated hidden temp", entries, err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, tok, err := f.ReadFile(ctx, "d/big.parquet")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadFile = %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
	if !strings.HasSuffix(strings.Trim(string(tok), `"`), "-4") {
		t.Errorf("ETag %s: want a 4-part multipart ETag", tok)
	}
	c := h.counts()
	if c["PUT part"] != 4 || c["POST complete"] != 1 || c["POST create upload"] != 1 {
		t.Errorf("requests = %v; want 1 upload of 4 parts, completed once", c)
	}
	entries, err = f.List(ctx, "d")
	if err != nil || len(entries) != 1 || entries[0].Name != "big.parquet" {
		t.Errorf("List(d) after Commit = %+v, %v", entries, err)
	}
}

// TestMultipartCommitRace: of multipart writers to one name exactly one
// commits; the losers' uploads are gone.
func TestMultipartCommitRace(t *testing.T) {
	srv := s3test.Start(t)
	f := srv.FS(t, smallParts)
	ctx := t.Context()
	const n = 4
	ws := make([]fsys.Writer, n)
	for i := range ws {
		w, err := write(ctx, f, "race/obj", pattern(s3fs.MinPartSize+1000*i, byte(i)), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() { errs[i] = w.Commit(ctx) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both committed", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, fsys.ErrExist):
			t.Errorf("writer %d: %v, want ErrExist", i, err)
		}
		if err := ws[i].Abort(); err != nil {
			t.Errorf("Abort %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("nobody committed")
	}
	got, _, err := f.ReadFile(ctx, "race/obj")
	if err != nil || !bytes.Equal(got, pattern(s3fs.MinPartSize+1000*winner, byte(winner))) {
		t.Errorf("content is not the winner's (%v)", err)
	}
	if entries, err := f.List(ctx, "race"); err != nil || len(entries) != 1 {
		t.Errorf("List(race) = %+v, %v; want the object and no upload left", entries, err)
	}
}

// TestUploadTempDelete: deleting an upload's hidden temp (what sweep
// does with a stale one) aborts it, and the writer's Commit then fails.
func TestUploadTempDelete(t *testing.T) {
	srv := s3test.Start(t)
	// Wait for each part to be stored before aborting: versitygw may
	// bring an upload back that is aborted while a part is arriving (a
	// writer's parts stop long before sweep deems its upload stale).
	parts := make(chan struct{}, 10)
	h := newHook()
	h.after = func(r *http.Request, resp *http.Response, err error) (*http.Response, error) {
		if kind(r) == "PUT part" {
			parts <- struct{}{}
		}
		return resp, err
	}
	f := srv.FS(t, smallParts, withHook(h))
	ctx := t.Context()
	w, err := write(ctx, f, "v1/0.parquet", pattern(s3fs.MinPartSize+1, 1), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	<-parts
	entries, err := f.List(ctx, "v1")
	if err != nil || len(entries) != 1 || !fsys.IsTemp(entries[0].Name) {
		t.Fatalf("List(v1) = %+v, %v; want one upload", entries, err)
	}
	if err := f.Delete(ctx, "v1/"+entries[0].Name); err != nil {
		t.Fatal(err)
	}
	if _, err := f.List(ctx, "v1"); !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("List(v1) after deleting the upload: %v, want ErrNotExist", err)
	}
	if err := w.Commit(ctx); err == nil {
		t.Error("Commit of an aborted upload succeeded")
	}
	if err := w.Abort(); err != nil {
		t.Errorf("Abort after the failed Commit: %v", err)
	}
	if _, err := f.Stat(ctx, "v1/0.parquet"); !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("Stat: %v, want ErrNotExist", err)
	}

	// DeleteAll aborts the uploads below the directory.
	w, err = write(ctx, f, "v2/p=1/0.parquet", pattern(s3fs.MinPartSize+1, 2), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	<-parts
	if err := f.CreateExclusive(ctx, "v2/.version.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := f.DeleteAll(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	ups, err := srv.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(f.Bucket())})
	if err != nil || len(ups.Uploads) != 0 {
		t.Errorf("uploads left after DeleteAll: %d (%v)", len(ups.Uploads), err)
	}
	if err := w.Commit(ctx); err == nil {
		t.Error("Commit into a deleted directory's aborted upload succeeded")
	}
	_ = w.Abort()
}

// TestUploadDatedByNewestPart: a long write's upload is dated by its
// newest part, not its start, so that it does not look abandoned.
func TestUploadDatedByNewestPart(t *testing.T) {
	srv := s3test.Start(t)
	parts := make(chan struct{}, 10)
	h := newHook()
	h.after = func(r *http.Request, resp *http.Response, err error) (*http.Response, error) {
		if kind(r) == "PUT part" {
			parts <- struct{}{}
		}
		return resp, err
	}
	f := srv.FS(t, smallParts, withHook(h))
	ctx := t.Context()
	w, err := write(ctx, f, "d/x", pattern(s3fs.MinPartSize+1, 1), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	<-parts
	first := time.Now()
	time.Sleep(2100 * time.Millisecond)
	if _, err := w.Write(pattern(s3fs.MinPartSize, 2)); err != nil {
		t.Fatal(err)
	}
	<-parts
	// (versitygw's Initiated is its upload directory's mtime, which each
	// part moves: there the listing alone would do.)
	defer s3fs.SetUploadAgeCheck(s3fs.SetUploadAgeCheck(0))
	h.counts()
	entries, err := f.List(ctx, "d")
	if c := h.counts(); c["GET parts"] != 1 {
		t.Errorf("List requests %v: want the upload's parts listed", c)
	}
	if err != nil || len(entries) != 1 || !fsys.IsTemp(entries[0].Name) {
		t.Fatalf("List(d) = %+v, %v", entries, err)
	}
	if dated := entries[0].ModTime; dated.Before(first.Truncate(time.Second).Add(time.Second)) {
		t.Errorf("upload dated %v; its first part landed at %v and its second 2 s later", dated, first)
	}
}

// TestHiddenUploads: with HideUploads List makes one request and shows
// no upload.
func TestHiddenUploads(t *testing.T) {
	srv := s3test.Start(t)
	h := newHook()
	f := srv.FS(t, smallParts, withHook(h), func(c *s3fs.Config) { c.HideUploads = true })
	ctx := t.Context()
	w, err := write(ctx, f, "d/x", pattern(s3fs.MinPartSize+1, 1), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := f.CreateExclusive(ctx, "d/y", nil); err != nil {
		t.Fatal(err)
	}
	h.counts()
	entries, err := f.List(ctx, "d")
	if err != nil || len(entries) != 1 || entries[0].Name != "y" {
		t.Errorf("List(d) = %+v, %v; want [y]", entries, err)
	}
	if c := h.counts(); c["GET list"] != 1 || c["GET uploads"] != 0 {
		t.Errorf("List requests = %v, want one listing", c)
	}
}

// TestReadAhead: Parquet-style reads (the footer, then small reads
// scattered in a window) cost few requests, large reads go straight
// through, and sequential reads use growing windows.
func TestReadAhead(t *testing.T) {
	srv := s3test.Start(t)
	h := newHook()
	f := srv.FS(t, withHook(h), func(c *s3fs.Config) { c.ReadAhead = 64 << 10 })
	ctx := t.Context()
	data := pattern(4<<20, 3)
	if err := f.CreateExclusive(ctx, "obj", data); err != nil {
		t.Fatal(err)
	}
	h.counts()
	r, err := f.Open(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if c := h.counts(); c["GET range"] != 1 || len(c) != 1 {
		t.Errorf("Open: requests %v, want one ranged GET (no HEAD)", c)
	}
	read := func(off int64, n int) {
		t.Helper()
		b := make([]byte, n)
		if _, err := r.ReadAt(b, off); err != nil && err != io.EOF {
			t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
		}
		if !bytes.Equal(b, data[off:off+int64(n)]) {
			t.Fatalf("ReadAt(%d, %d): wrong bytes", off, n)
		}
	}
	// The footer: in what Open fetched.
	read(int64(len(data))-8, 8)
	read(int64(len(data))-5000, 4000)
	if c := h.counts(); len(c) != 0 {
		t.Errorf("footer reads: requests %v, want none", c)
	}
	// 100 small reads within one 64 KiB window: one request.
	for i := range 100 {
		read(1<<20+int64(i*500), 100)
	}
	if c := h.counts(); c["GET range"] != 1 {
		t.Errorf("100 small reads in one window: %v, want 1 ranged GET", c)
	}
	// A large read is one request of its own size.
	read(2<<20, 1<<20)
	if c := h.counts(); c["GET range"] != 1 {
		t.Errorf("a 1 MiB read: %v, want 1 ranged GET", c)
	}
	// Reading it all sequentially in 4 KiB pieces: windows grow to 4 ×
	// 64 KiB, so about 4 MiB / 256 KiB requests, not 1024.
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	if _, err := io.CopyBuffer(&all, struct{ io.Reader }{r}, make([]byte, 4096)); err != nil || !bytes.Equal(all.Bytes(), data) {
		t.Fatalf("sequential read: %d bytes, %v", all.Len(), err)
	}
	if c := h.counts(); c["GET range"] > 20 {
		t.Errorf("sequential read of 4 MiB: %v requests, want ≤ 20", c)
	}
}

// TestOpenReplaced: a File never mixes two versions of an object: what
// Open fetched stays readable, reads past it of a replaced object fail.
func TestOpenReplaced(t *testing.T) {
	srv := s3test.Start(t)
	f := srv.FS(t, func(c *s3fs.Config) { c.ReadAhead = 64 << 10 })
	ctx := t.Context()
	if err := f.Replace(ctx, "m", pattern(1<<20, 1), ""); err != nil {
		t.Fatal(err)
	}
	_, tok, err := f.ReadFile(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.Open(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := f.Replace(ctx, "m", pattern(1<<20, 2), tok); err != nil {
		t.Fatal(err)
	}
	tail := make([]byte, 100)
	if _, err := r.ReadAt(tail, 1<<20-100); err != nil || !bytes.Equal(tail, pattern(1<<20, 1)[1<<20-100:]) {
		t.Errorf("tail read after Replace: %v (or new bytes)", err)
	}
	if _, err := r.ReadAt(make([]byte, 100), 0); err == nil {
		t.Error("a read of a replaced object past the fetched tail succeeded")
	}
}

// TestLostAnswer: a conditional write whose answer is lost (the request
// landed, the connection dropped) is retried, and the retry's 412 is
// recognised as the earlier attempt's success — for the lock this is the
// difference between holding it and waiting on ourselves.
func TestLostAnswer(t *testing.T) {
	srv := s3test.Start(t)
	h := newHook()
	f := srv.FS(t, withHook(h), smallParts)
	ctx := t.Context()
	var drop atomic.Int32
	h.after = func(r *http.Request, resp *http.Response, err error) (*http.Response, error) {
		if err == nil && (r.Method == http.MethodPut && !r.URL.Query().Has("partNumber") || kind(r) == "POST complete") && drop.Add(-1) >= 0 {
			resp.Body.Close()
			return nil, io.ErrUnexpectedEOF // the write happened; its answer is lost
		}
		return resp, err
	}
	cases := []struct {
		name string
		op   func() error
	}{
		{"CreateExclusive", func() error { return f.CreateExclusive(ctx, "lock", []byte("me")) }},
		{"Replace", func() error {
			_, tok, err := f.ReadFile(ctx, "lock")
			if err != nil {
				return err
			}
			return f.Replace(ctx, "lock", []byte("me again"), tok)
		}},
		{"Mkdir", func() error { return f.Mkdir(ctx, "v7") }},
		{"Commit small", func() error {
			w, err := write(ctx, f, "v7/0.parquet", []byte("small"), 10)
			if err != nil {
				return err
			}
			return w.Commit(ctx)
		}},
		{"Commit multipart", func() error {
			w, err := write(ctx, f, "v7/1.parquet", pattern(s3fs.MinPartSize+5, 1), 1<<20)
			if err != nil {
				return err
			}
			return w.Commit(ctx)
		}},
	}
	for _, c := range cases {
		drop.Store(1)
		if err := c.op(); err != nil {
			t.Errorf("%s with its first answer lost: %v, want success", c.name, err)
		}
		if drop.Load() >= 0 {
			t.Errorf("%s: no answer was dropped", c.name)
		}
	}
	// Another writer's object is still ErrExist, however the answers go.
	drop.Store(1)
	if err := f.CreateExclusive(ctx, "other", []byte("theirs")); err != nil {
		t.Fatal(err)
	}
	drop.Store(0)
	if err := f.CreateExclusive(ctx, "other", []byte("mine")); !errors.Is(err, fsys.ErrExist) {
		t.Errorf("CreateExclusive over another's object: %v, want ErrExist", err)
	}
}

// cutBody breaks off after n bytes, as a dropped connection does.
type cutBody struct {
	r io.ReadCloser
	n int
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	k, err := c.r.Read(p[:min(len(p), c.n)])
	c.n -= k
	return k, err
}

func (c *cutBody) Close() error { return c.r.Close() }

// TestBodyCutRetried: a GET whose body breaks off is sent again; the
// reader gets the whole object.
func TestBodyCutRetried(t *testing.T) {
	srv := s3test.Start(t)
	h := newHook()
	f := srv.FS(t, withHook(h), func(c *s3fs.Config) { c.ReadAhead = 64 << 10 })
	ctx := t.Context()
	data := pattern(1<<20, 5)
	if err := f.CreateExclusive(ctx, "obj", data); err != nil {
		t.Fatal(err)
	}
	var cuts atomic.Int32
	h.after = func(r *http.Request, resp *http.Response, err error) (*http.Response, error) {
		if err == nil && r.Method == http.MethodGet && resp.StatusCode/100 == 2 && cuts.Add(-1) >= 0 {
			resp.Body = &cutBody{r: resp.Body, n: 1000}
		}
		return resp, err
	}
	cuts.Store(2)
	if got, _, err := f.ReadFile(ctx, "obj"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("ReadFile with two broken bodies: %d bytes, %v", len(got), err)
	}
	r, err := f.Open(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cuts.Store(2)
	b := make([]byte, 256<<10)
	if _, err := r.ReadAt(b, 100); err != nil || !bytes.Equal(b, data[100:100+len(b)]) {
		t.Errorf("ReadAt with two broken bodies: %v", err)
	}
	cuts.Store(100)
	if _, err := r.ReadAt(b, 200); err == nil {
		t.Error("ReadAt succeeded although every body broke off")
	}
}

// TestConflictRetried: AWS answers 409 ConditionalRequestConflict to a
// conditional write racing another on the same key; nothing was written,
// so the write is tried again.
func TestConflictRetried(t *testing.T) {
	srv := s3test.Start(t)
	h := newHook()
	f := srv.FS(t, withHook(h))
	var conflicts atomic.Int32
	conflicts.Store(2)
	h.instead = func(r *http.Request) *http.Response {
		if r.Method != http.MethodPut || conflicts.Add(-1) < 0 {
			return nil
		}
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>ConditionalRequestConflict</Code><Message>A conflicting conditional operation is currently in progress against this resource.</Message><RequestId>R</RequestId></Error>`
		return &http.Response{
			StatusCode: http.StatusConflict, Status: "409 Conflict", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)), Request: r,
		}
	}
	ctx := t.Context()
	if err := f.CreateExclusive(ctx, "lock", []byte("me")); err != nil {
		t.Fatalf("CreateExclusive after two conflicts: %v", err)
	}
	if got, _, err := f.ReadFile(ctx, "lock"); err != nil || string(got) != "me" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	if c := h.counts(); c["PUT"] != 3 {
		t.Errorf("PUTs = %d, want 3 (two conflicts, then the write)", c["PUT"])
	}
}

// TestDeleteIfMatch: a conditional delete removes only the state it was
// given.
func TestDeleteIfMatch(t *testing.T) {
	srv := s3test.Start(t)
	f := srv.FS(t)
	ctx := t.Context()
	if err := f.CreateExclusive(ctx, "lock", []byte("mine")); err != nil {
		t.Fatal(err)
	}
	_, mine, _ := f.ReadFile(ctx, "lock")
	if err := f.Replace(ctx, "lock", []byte("taken over"), mine); err != nil {
		t.Fatal(err)
	}
	if err := f.DeleteIfMatch(ctx, "lock", mine); !errors.Is(err, fsys.ErrPrecondition) {
		t.Errorf("DeleteIfMatch with a stale ETag: %v, want ErrPrecondition", err)
	}
	got, theirs, err := f.ReadFile(ctx, "lock")
	if err != nil || string(got) != "taken over" {
		t.Fatalf("after a refused delete: %q, %v", got, err)
	}
	if err := f.DeleteIfMatch(ctx, "lock", theirs); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(ctx, "lock"); !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("Stat after DeleteIfMatch: %v", err)
	}
	if err := f.DeleteIfMatch(ctx, "lock", theirs); err != nil {
		t.Errorf("DeleteIfMatch of a missing object: %v", err)
	}
	if err := f.DeleteIfMatch(ctx, "lock", ""); err == nil {
		t.Errorf("DeleteIfMatch without a token: %v", err)
	}
}

// TestProbeIgnoredConditions: a service that ignores the conditional
// headers is found out by Probe and refused by Require; one that ignores
// them only on CompleteMultipartUpload gets the HEAD-then-complete
// fallback, under which Commit still refuses an existing name.
func TestProbeIgnoredConditions(t *testing.T) {
	srv := s3test.Start(t)
	for _, c := range []struct {
		name  string
		strip func(*http.Request) bool
		want  s3fs.Support
	}{
		{"all", func(*http.Request) bool { return true }, s3fs.Support{}},
		{"complete", func(r *http.Request) bool { return kind(r) == "POST complete" },
			s3fs.Support{ConditionalCreate: true, ConditionalReplace: true, ConditionalDelete: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := srv.FS(t, smallParts, func(cfg *s3fs.Config) {
				cfg.NoConditionalComplete = !c.want.ConditionalComplete
				cfg.ClientOptions = append(cfg.ClientOptions, stripConditions(c.strip))
			})
			sup, err := f.Probe(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if sup != c.want {
				t.Errorf("Probe = %+v, want %+v", sup, c.want)
			}
			if err := sup.Require(); (err == nil) != c.want.ConditionalCreate || err != nil && !errors.Is(err, s3fs.ErrNoConditionalWrites) {
				t.Errorf("Require: %v", err)
			}
			if !c.want.ConditionalCreate {
				return
			}
			ctx := t.Context()
			if err := f.CreateExclusive(ctx, "x", []byte("first")); err != nil {
				t.Fatal(err)
			}
			w, err := write(ctx, f, "x", pattern(s3fs.MinPartSize+1, 1), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Commit(ctx); !errors.Is(err, fsys.ErrExist) {
				t.Errorf("fallback Commit over an existing object: %v, want ErrExist", err)
			}
			_ = w.Abort()
			if got, _, _ := f.ReadFile(ctx, "x"); string(got) != "first" {
				t.Errorf("object replaced: %.20q", got)
			}
		})
	}
}

// stripConditions removes the conditional headers from the requests strip
// picks, before they are signed: the service then sees unconditional
// writes, as one that ignores the headers would.
func stripConditions(strip func(*http.Request) bool) func(*s3.Options) {
	mw := middleware.FinalizeMiddlewareFunc("quiver-strip-conditions", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		if req, ok := in.Request.(*smithyhttp.Request); ok && strip(req.Request) {
			req.Header.Del("If-None-Match")
			req.Header.Del("If-Match")
		}
		return next.HandleFinalize(ctx, in)
	})
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Insert(mw, "Signing", middleware.Before)
		})
	}
}

// TestErrorsNameNoLocation: whatever fails, an error names the operation
// and the relative name, never the endpoint, bucket or prefix.
func TestErrorsNameNoLocation(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	ctx := t.Context()
	mk := func(edit func(*s3fs.Config)) *s3fs.FS {
		cfg := srv.Config(bucket, "secret-prefix/deeper")
		edit(&cfg)
		f, err := s3fs.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	good := mk(func(*s3fs.Config) {})
	if err := good.CreateExclusive(ctx, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	fss := map[string]*s3fs.FS{
		"no such bucket": mk(func(c *s3fs.Config) { c.Bucket = "no-such-bucket-xyz" }),
		"bad secret": mk(func(c *s3fs.Config) {
			c.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: s3test.AccessKey, SecretAccessKey: "wrong"}, nil
			})
		}),
		"ok": good,
	}
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
			return
		}
		msg := err.Error()
		t.Logf("%s: %s", what, msg)
		for _, bad := range []string{srv.Endpoint, strings.TrimPrefix(srv.Endpoint, "http://"), "127.0.0.1", bucket, "no-such-bucket-xyz", "secret-prefix", srv.Dir} {
			if strings.Contains(msg, bad) {
				t.Errorf("%s: error %q contains %q", what, msg, bad)
			}
		}
		if !strings.HasPrefix(msg, "s3fs: ") {
			t.Errorf("%s: error %q does not say where it came from", what, msg)
		}
	}
	for name, f := range fss {
		_, _, err := f.ReadFile(ctx, "missing")
		check(name+": ReadFile", err)
		check(name+": CreateExclusive", f.CreateExclusive(ctx, "a/b", []byte("y")))
		_, err = f.List(ctx, "nope")
		check(name+": List", err)
		err = f.Replace(ctx, "a/b", []byte("z"), `"bogus"`)
		check(name+": Replace", err)
		if name != "ok" && (errors.Is(err, fsys.ErrPrecondition) || errors.Is(err, fsys.ErrNotExist)) {
			t.Errorf("%s: Replace: %v; a missing bucket or bad credentials must not look like a changed or missing object", name, err)
		}
		if _, _, err := f.ReadFile(ctx, "a/b"); name != "ok" && errors.Is(err, fsys.ErrNotExist) {
			t.Errorf("%s: ReadFile: %v; must not look like a missing object", name, err)
		}
	}
	srv.Kill()
	_, _, err := good.ReadFile(ctx, "a/b")
	check("server down: ReadFile", err)
	check("server down: Mkdir", good.Mkdir(ctx, "d"))
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in             string
		bucket, prefix string
		ok             bool
	}{
		{"s3://bucket", "bucket", "", true},
		{"s3://bucket/", "bucket", "", true},
		{"s3://bucket/a/b", "bucket", "a/b", true},
		{"s3://bucket/a/b/", "bucket", "a/b", true},
		{"s3://my.bucket-1/data", "my.bucket-1", "data", true},
		{"s3://", "", "", false},
		{"s3://b", "", "", false},
		{"s3://Bucket/x", "", "", false},
		{"s3://bucket//x", "", "", false},
		{"s3://bucket/a/../b", "", "", false},
		{"s3://bucket/./b", "", "", false},
		{"/data", "", "", false},
		{"S3://bucket", "", "", false},
		{"s3://bucket/a\\b", "", "", false},
	} {
		b, p, err := s3fs.ParseURL(c.in)
		if (err == nil) != c.ok || c.ok && (b != c.bucket || p != c.prefix) {
			t.Errorf("ParseURL(%q) = %q, %q, %v", c.in, b, p, err)
		}
		if err != nil && !errors.Is(err, s3fs.ErrBadURL) {
			t.Errorf("ParseURL(%q): %v is not ErrBadURL", c.in, err)
		}
	}
	if !s3fs.IsURL("s3://b/p") || s3fs.IsURL("./data") {
		t.Error("IsURL")
	}
}

// FuzzParseURL: what ParseURL accepts is a bucket and a clean prefix that
// name the same place again.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://bucket/a/b", "s3://b.c-d/", "s3://bucket/../x", "s3://bucket//x", "s3://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, p, err := s3fs.ParseURL(s)
		if err != nil {
			if !errors.Is(err, s3fs.ErrBadURL) {
				t.Fatalf("ParseURL(%q): %v is not ErrBadURL", s, err)
			}
			return
		}
		if p != "" && !fsys.ValidName(p) || strings.Contains(b, "/") {
			t.Fatalf("ParseURL(%q) = %q, %q", s, b, p)
		}
		if b2, p2, err := s3fs.ParseURL("s3://" + b + "/" + p); err != nil || b2 != b || p2 != p {
			t.Fatalf("ParseURL of its own result %q/%q = %q, %q, %v", b, p, b2, p2, err)
		}
	})
}
