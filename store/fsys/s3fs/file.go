package s3fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/quiverdb/quiver/store/fsys"
)

// Open implements fsys.FS. It fetches the object's last ReadAhead bytes
// (a suffix range: the whole of a small object, the footer of a Parquet
// file) and learns its size and ETag from the answer; later reads are
// ranged GETs with If-Match on that ETag, so a File never mixes two
// versions of an object: reads of one replaced or deleted since Open fail
// (beyond what Open fetched, which stays readable).
func (f *FS) Open(ctx context.Context, name string) (fsys.File, error) {
	const op = "open"
	if err := f.begin(ctx, fsys.ValidName(name)); err != nil {
		return nil, pathErr(op, name, err)
	}
	key := f.key(name)
	out, err := f.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: &f.bucket, Key: &key,
		Range: aws.String("bytes=-" + strconv.FormatInt(f.readAhead, 10)),
	})
	if err != nil {
		err = f.clean(err)
		var se *serviceError
		if errors.As(err, &se) && (se.status == 416 || se.code == "InvalidRange") {
			return f.openEmpty(ctx, name, key)
		}
		return nil, pathErr(op, name, err)
	}
	defer out.Body.Close()
	r := &file{fs: f, ctx: ctx, name: name, key: key, etag: aws.ToString(out.ETag)}
	start, size, ok := parseContentRange(aws.ToString(out.ContentRange))
	if !ok {
		// A service that ignored the range sent the whole object.
		start, size = 0, aws.ToInt64(out.ContentLength)
	}
	r.size = size
	n := min(size-start, max(f.readAhead, 4*f.readAhead))
	data, err := readAll(out.Body, n)
	if err != nil {
		return nil, pathErr(op, name, f.clean(err))
	}
	r.blocks = append(r.blocks, block{off: start, data: data})
	return r, nil
}

// openEmpty opens an object a suffix range could not be satisfied on:
// an empty one (HEAD says so, and that it exists).
func (f *FS) openEmpty(ctx context.Context, name, key string) (fsys.File, error) {
	out, err := f.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &f.bucket, Key: &key})
	if err != nil {
		return nil, pathErr("open", name, f.cleanHead(err))
	}
	if n := aws.ToInt64(out.ContentLength); n != 0 {
		return nil, pathErr("open", name, fmt.Errorf("range refused on a %d-byte object", n))
	}
	return &file{fs: f, ctx: ctx, name: name, key: key, etag: aws.ToString(out.ETag)}, nil
}

// parseContentRange reads "bytes START-END/SIZE".
func parseContentRange(s string) (start, size int64, ok bool) {
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, false
	}
	rng, total, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, false
	}
	a, _, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	size, err2 := strconv.ParseInt(total, 10, 64)
	if err1 != nil || err2 != nil || start < 0 || start > size {
		return 0, 0, false
	}
	return start, size, true
}

// file is FS's File: ranged GETs through a small cache of read-ahead
// windows. ReadAt is safe for concurrent use.
type file struct {
	fs   *FS
	ctx  context.Context // Open's: bounds every read
	name string
	key  string
	etag string
	size int64

	mu     sync.Mutex
	blocks []block // most recently used last
	pos    int64
	seqWin int64 // the window of sequential Reads, growing
	closed bool
}

type block struct {
	off  int64
	data []byte
}

func (r *file) Size() int64 { return r.size }

func (r *file) ReadAt(p []byte, off int64) (int, error) {
	return r.readAt(p, off, r.fs.readAhead)
}

// readAt reads p at off; a miss smaller than ahead fetches (and caches)
// a window of ahead bytes.
func (r *file) readAt(p []byte, off, ahead int64) (int, error) {
	if off < 0 {
		return 0, pathErr("read", r.name, errors.New("negative offset"))
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return 0, pathErr("read", r.name, ErrClosed)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := int(min(int64(len(p)), r.size-off))
	n := 0
	for n < want {
		at := off + int64(n)
		if k := r.cached(p[n:want], at); k > 0 {
			n += k
			continue
		}
		rest := int64(want - n)
		if rest >= ahead {
			// A large read (a column chunk): straight into p.
			if err := r.fetch(p[n:want], at); err != nil {
				return n, err
			}
			n = want
			break
		}
		w := make([]byte, min(ahead, r.size-at))
		if err := r.fetch(w, at); err != nil {
			return n, err
		}
		r.mu.Lock()
		r.blocks = append(r.blocks, block{off: at, data: w})
		if len(r.blocks) > cacheBlocks {
			r.blocks = r.blocks[1:]
		}
		r.mu.Unlock()
	}
	if want < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// cached copies what the cache holds of [at, at+len(p)) from its start.
func (r *file) cached(p []byte, at int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.blocks) - 1; i >= 0; i-- {
		b := r.blocks[i]
		if at >= b.off && at < b.off+int64(len(b.data)) {
			if i != len(r.blocks)-1 { // keep the most recently used last
				r.blocks = append(append(r.blocks[:i:i], r.blocks[i+1:]...), b)
			}
			return copy(p, b.data[at-b.off:])
		}
	}
	return 0
}

// fetch reads exactly len(p) bytes at off with one ranged GET.
func (r *file) fetch(p []byte, off int64) error {
	rng := "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+int64(len(p))-1, 10)
	in := &s3.GetObjectInput{Bucket: &r.fs.bucket, Key: &r.key, Range: &rng}
	if r.etag != "" {
		in.IfMatch = &r.etag
	}
	err := r.fs.get(r.ctx, in, func(out *s3.GetObjectOutput) error {
		_, err := io.ReadFull(out.Body, p)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	})
	if errors.Is(err, fsys.ErrPrecondition) || errors.Is(err, fsys.ErrNotExist) {
		err = fmt.Errorf("object replaced or deleted since it was opened: %w", err)
	}
	if err != nil {
		return pathErr("read", r.name, err)
	}
	return nil
}

func (r *file) Read(p []byte) (int, error) {
	r.mu.Lock()
	pos := r.pos
	// Sequential reads fetch growing windows: 1, 2, 4 × ReadAhead.
	win := max(r.seqWin, r.fs.readAhead)
	r.mu.Unlock()
	if len(p) == 0 {
		if pos >= r.size {
			return 0, io.EOF
		}
		return 0, nil
	}
	n, err := r.readAt(p, pos, win)
	r.mu.Lock()
	r.pos = pos + int64(n)
	r.seqWin = min(2*win, 4*r.fs.readAhead)
	r.mu.Unlock()
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (r *file) Seek(offset int64, whence int) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = r.pos + offset
	case io.SeekEnd:
		abs = r.size + offset
	default:
		return 0, pathErr("seek", r.name, errors.New("invalid whence"))
	}
	if abs < 0 {
		return 0, pathErr("seek", r.name, errors.New("negative position"))
	}
	r.pos = abs
	return abs, nil
}

func (r *file) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return pathErr("close", r.name, ErrClosed)
	}
	r.closed = true
	r.blocks = nil
	return nil
}
