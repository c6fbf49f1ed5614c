package s3fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/quiverdb/quiver/store/fsys"
)

// Create implements fsys.FS. Nothing is sent until a part fills up: an
// object smaller than one part is one conditional PutObject at Commit;
// a larger one is a multipart upload (parts uploaded while the next one
// fills, so at most two parts are in memory) completed by Commit with
// If-None-Match: *.
func (f *FS) Create(ctx context.Context, name string) (fsys.Writer, error) {
	const op = "create"
	if err := f.begin(ctx, fsys.ValidName(name)); err != nil {
		return nil, pathErr(op, name, err)
	}
	return &writer{fs: f, ctx: ctx, name: name, key: f.key(name), id: newWriteID()}, nil
}

type writerState int

const (
	writing writerState = iota
	committed
	failed  // Commit failed: Abort cleans up
	aborted // finished without an object
)

// writer is FS's Writer. It is not safe for concurrent use.
type writer struct {
	fs   *FS
	ctx  context.Context // Create's: bounds the part uploads
	name string
	key  string
	id   string // the write id (see writeIDKey)

	state    writerState
	err      error // sticky: the first failed part upload
	buf      []byte
	spare    []byte // the buffer of the last uploaded part, for reuse
	uploadID string
	parts    []types.CompletedPart
	inflight chan partResult // the part being uploaded, if any
}

type partResult struct {
	part types.CompletedPart
	buf  []byte
	err  error
}

func (w *writer) Write(p []byte) (int, error) {
	if w.state != writing {
		return 0, pathErr("write", w.name, ErrClosed)
	}
	if w.err != nil {
		return 0, w.err
	}
	n := 0
	for len(p) > 0 {
		room := int(w.fs.partSize) - len(w.buf)
		if room == 0 {
			if err := w.flush(w.ctx); err != nil {
				w.err = pathErr("write", w.name, err)
				return n, w.err
			}
			continue
		}
		k := min(room, len(p))
		w.buf = grow(w.buf, k, int(w.fs.partSize))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		n += k
	}
	return n, nil
}

// grow makes room for k more bytes in b without letting its capacity
// pass limit (append's doubling would).
func grow(b []byte, k, limit int) []byte {
	need := len(b) + k
	if need <= cap(b) {
		return b
	}
	c := min(limit, max(need, 2*cap(b), 64<<10))
	nb := make([]byte, len(b), c)
	copy(nb, b)
	return nb
}

// flush hands the full buffer to a part upload, starting the multipart
// upload first if needed and waiting for the previous part.
func (w *writer) flush(ctx context.Context) error {
	if w.uploadID == "" {
		out, err := w.fs.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
			Bucket:            &w.fs.bucket,
			Key:               &w.key,
			Metadata:          map[string]string{writeIDKey: w.id},
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
		})
		if err != nil {
			return w.fs.clean(err)
		}
		w.uploadID = aws.ToString(out.UploadId)
	}
	if err := w.wait(); err != nil {
		return err
	}
	num := int32(len(w.parts) + 1)
	buf := w.buf
	w.buf, w.spare = w.spare[:0], nil
	ch := make(chan partResult, 1)
	w.inflight = ch
	go func() {
		out, err := w.fs.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket:            &w.fs.bucket,
			Key:               &w.key,
			UploadId:          &w.uploadID,
			PartNumber:        &num,
			Body:              bytes.NewReader(buf),
			ContentLength:     aws.Int64(int64(len(buf))),
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
		})
		r := partResult{buf: buf, err: err}
		if err == nil {
			r.part = types.CompletedPart{PartNumber: &num, ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32}
		}
		ch <- r
	}()
	return nil
}

// wait waits for the part in flight, if any.
func (w *writer) wait() error {
	if w.inflight == nil {
		return nil
	}
	r := <-w.inflight
	w.inflight = nil
	if r.err != nil {
		return w.fs.clean(r.err)
	}
	w.parts = append(w.parts, r.part)
	w.spare = r.buf
	return nil
}

// Buffered is the memory the writer holds now: the part filling and the
// one uploading (at most two parts). The store may charge it to its put
// memory budget.
func (w *writer) Buffered() int64 {
	n := int64(cap(w.buf) + cap(w.spare))
	if w.inflight != nil {
		n += w.fs.partSize
	}
	return n
}

// Commit implements fsys.Writer.
func (w *writer) Commit(ctx context.Context) error {
	const op = "commit"
	switch {
	case w.state == committed:
		return pathErr(op, w.name, errors.New("already committed"))
	case w.state != writing:
		return pathErr(op, w.name, ErrClosed)
	case w.err != nil:
		w.state = failed
		return w.err
	}
	if err := ctx.Err(); err != nil {
		w.state = failed
		return pathErr(op, w.name, err)
	}
	var err error
	if w.uploadID == "" {
		err = w.fs.put(ctx, w.key, w.buf, "")
		w.buf = nil
	} else {
		err = w.complete(ctx)
	}
	err = exists(err)
	if err != nil {
		w.state = failed
		if errors.Is(err, fsys.ErrExist) {
			// Definitely not ours: the upload can go now.
			_ = w.cleanup()
		}
		return pathErr(op, w.name, err)
	}
	w.state = committed
	w.buf, w.spare = nil, nil
	return nil
}

// complete uploads the last part and completes the upload.
func (w *writer) complete(ctx context.Context) error {
	if len(w.buf) > 0 {
		if err := w.flush(ctx); err != nil {
			return err
		}
	}
	if err := w.wait(); err != nil {
		return err
	}
	w.buf, w.spare = nil, nil
	parts := slices.Clone(w.parts)
	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return int(aws.ToInt32(a.PartNumber) - aws.ToInt32(b.PartNumber)) })
	in := func() *s3.CompleteMultipartUploadInput {
		return &s3.CompleteMultipartUploadInput{
			Bucket:          &w.fs.bucket,
			Key:             &w.key,
			UploadId:        &w.uploadID,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		}
	}
	if w.fs.noCondDone {
		// The service cannot complete conditionally: look, then
		// complete (see Config.NoConditionalComplete).
		_, err := w.fs.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &w.fs.bucket, Key: &w.key})
		if err == nil {
			return fsys.ErrExist
		}
		if err = w.fs.cleanHead(err); !errors.Is(err, fsys.ErrNotExist) {
			return err
		}
		_, err = w.fs.client.CompleteMultipartUpload(ctx, in())
		return w.fs.clean(err)
	}
	return w.fs.conditional(ctx, w.key, w.id, func(ctx context.Context) error {
		req := in()
		req.IfNoneMatch = aws.String("*")
		_, err := w.fs.client.CompleteMultipartUpload(ctx, req, noRetry)
		return err
	})
}

// Abort implements fsys.Writer: AbortMultipartUpload, if one was started.
func (w *writer) Abort() error {
	switch w.state {
	case committed, aborted:
		return nil
	}
	w.state = aborted
	w.buf, w.spare = nil, nil
	if err := w.cleanup(); err != nil {
		return pathErr("abort", w.name, err)
	}
	return nil
}

// cleanup waits for a part in flight and aborts the upload, if any.
func (w *writer) cleanup() error {
	if w.inflight != nil {
		<-w.inflight
		w.inflight = nil
	}
	if w.uploadID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), time.Minute)
	defer cancel()
	id := w.uploadID
	w.uploadID = ""
	if err := w.fs.abort(ctx, w.key, id); err != nil {
		return fmt.Errorf("abort upload: %w", err)
	}
	return nil
}
