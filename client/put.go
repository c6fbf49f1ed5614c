package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/util"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/internal/ipcdict"
)

// PutOptions are the options of one put (docs/protocol.md, CMD
// descriptor).
type PutOptions struct {
	// Mode is catalog.ModeAppend (empty: add files to the latest version,
	// creating the profile if needed) or catalog.ModeWrite (a new version).
	Mode string
	// PartitionBy names hive partition columns (ModeWrite only).
	PartitionBy []string
	// SchemaVersion is stamped into every data file, e.g. "1.2.0".
	SchemaVersion string
	// Metadata is copied into the commit record; it must marshal to a JSON
	// object.
	Metadata map[string]any
	// RequestID is the idempotency key; empty generates one. Retries of
	// this put reuse it.
	RequestID string
	// Format is catalog.FormatParquet (empty) or catalog.FormatCSV: how
	// the server stores the files.
	Format string
	// SchemaPolicy ("additive" or "none") is set on the profile by the
	// put that creates it; a put to an existing profile may only name
	// the policy it has.
	SchemaPolicy string
	// Retry overrides the client's retry policy (WithRetry) for this put.
	Retry *RetryPolicy
}

// RetryPolicy says how a put that failed with codes.Unavailable is retried
// (with the same request id). The zero value does not retry.
type RetryPolicy struct {
	// Retries is how many times a put is tried again after its first
	// attempt.
	Retries int
	// Backoff is the wait before retry n (1, 2, …); nil waits n seconds.
	Backoff func(n int) time.Duration
	// OnRetry, when set, is called before each wait with the error of the
	// failed attempt (for a message to the user).
	OnRetry func(err error, n int, wait time.Duration)
}

// DefaultRetry retries twice, after 1 s and 2 s.
var DefaultRetry = RetryPolicy{Retries: 2}

func (p *RetryPolicy) wait(n int) time.Duration {
	if p.Backoff != nil {
		return p.Backoff(n)
	}
	return time.Duration(n) * time.Second
}

// Opener opens the data of one put attempt. PutFrom calls it once per
// attempt and releases the reader it returns when the attempt ends.
type Opener func(ctx context.Context) (array.RecordReader, error)

// NewRequestID returns a random request id ("quiver-go-" and 24 hex
// digits), as Put generates when PutOptions.RequestID is empty.
func NewRequestID() string { return newRequestID("quiver-go-") }

func newRequestID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return prefix + hex.EncodeToString(b)
}

// Put streams rdr into the profile at path as one put and returns its
// commit record. Batches are sent with rdr's schema, sliced so that no
// message exceeds WithMaxBatchBytes (a message the server refuses as too
// large fails the put with a *MessageTooLargeError). Nothing is committed unless the whole
// stream arrives: if rdr fails (a *ReaderError) or ctx ends, the stream is
// cancelled. The caller keeps ownership of rdr.
//
// A reader cannot be rewound, so Put retries (RetryPolicy) only an attempt
// that failed before it read from rdr — the server could not be reached;
// use PutFrom to retry a put after its data was sent.
func (c *Client) Put(ctx context.Context, path string, rdr array.RecordReader, opts PutOptions) (*catalog.PutResult, error) {
	return parseResult(c.PutRaw(ctx, path, rdr, opts))
}

// PutRaw is Put returning the PutResult as the server sent it (the
// app_metadata bytes of its one result message), unparsed: for a caller
// that checks the wire form of the result itself. Retries and errors are
// Put's.
func (c *Client) PutRaw(ctx context.Context, path string, rdr array.RecordReader, opts PutOptions) ([]byte, error) {
	g := &guardedReader{RecordReader: rdr}
	open := func(context.Context) (array.RecordReader, error) { return g, nil }
	return c.put(ctx, path, open, func() bool { return !g.read }, opts)
}

// parseResult decodes a put's app_metadata.
func parseResult(raw []byte, err error) (*catalog.PutResult, error) {
	if err != nil {
		return nil, err
	}
	var pr catalog.PutResult
	if err := json.Unmarshal(raw, &pr); err != nil {
		return nil, fmt.Errorf("%w: the server's put result is not JSON: %w", ErrUnexpectedResult, err)
	}
	return &pr, nil
}

// PutFrom is Put with a source it opens anew for each attempt, so that an
// attempt failing with codes.Unavailable after its data was sent — the
// connection broke, the server restarted, its lock was busy — is retried
// whole. The retry carries the same request id: if the failed attempt did
// commit, the server answers its result and writes nothing.
func (c *Client) PutFrom(ctx context.Context, path string, open Opener, opts PutOptions) (*catalog.PutResult, error) {
	return parseResult(c.put(ctx, path, open, func() bool { return true }, opts))
}

func (c *Client) put(ctx context.Context, path string, open Opener, again func() bool, opts PutOptions) ([]byte, error) {
	cmd := catalog.PutCommand{
		Path: path, Mode: opts.Mode, PartitionBy: opts.PartitionBy, SchemaVersion: opts.SchemaVersion,
		RequestID: opts.RequestID, Format: opts.Format, SchemaPolicy: opts.SchemaPolicy,
	}
	if cmd.RequestID == "" {
		cmd.RequestID = NewRequestID()
	}
	if opts.Metadata != nil {
		md, err := json.Marshal(opts.Metadata)
		if err != nil {
			return nil, fmt.Errorf("put %s: metadata: %w", path, err)
		}
		cmd.Metadata = md
	}
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("put %s: %w", path, err)
	}
	policy := c.opts.retry
	if opts.Retry != nil {
		policy = *opts.Retry
	}
	for n := 1; ; n++ {
		res, err := c.putOnce(ctx, b, open)
		var re *ReaderError
		if err == nil || n > policy.Retries || ctx.Err() != nil || errors.As(err, &re) ||
			status.Code(err) != codes.Unavailable || !again() {
			return res, err
		}
		wait := policy.wait(n)
		if policy.OnRetry != nil {
			policy.OnRetry(err, n, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// putOnce is one attempt: open, stream, read the one PutResult (its
// app_metadata).
func (c *Client) putOnce(ctx context.Context, cmd []byte, open Opener) ([]byte, error) {
	rdr, err := open(ctx)
	if err != nil {
		return nil, &ReaderError{Err: err}
	}
	defer rdr.Release()
	schema := rdr.Schema()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a put that fails on our side is cancelled: it commits nothing
	stream, err := c.fc.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	// ipcdict's writer, not flight's: arrow-go's IPC writer does not send
	// a float dictionary within 1e-5 of the last one sent, and the server
	// would store the earlier batch's values (0.0 as -0.0).
	pp := &putPayloads{stream: stream, desc: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}, buf: bodyBufs.Get().(*bytes.Buffer)}
	defer pp.done()
	w := ipcdict.NewWriter(pp, schema, false, ipc.WithAllocator(c.opts.mem))
	sendErr := func() error {
		for rdr.Next() {
			if err := c.sendBatch(w, schema, rdr.RecordBatch()); err != nil {
				return err // the server ended the put; Recv says why
			}
		}
		if err := rdr.Err(); err != nil {
			return &ReaderError{Err: err}
		}
		return nil
	}()
	var re *ReaderError
	if errors.As(sendErr, &re) {
		cancel() // our input failed: the put must commit nothing
		_ = w.Close()
		return nil, re
	}
	if err := w.Close(); err != nil && sendErr == nil {
		sendErr = err
	}
	if err := stream.CloseSend(); err != nil && sendErr == nil {
		sendErr = err
	}
	res, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: the put ended without a result", ErrUnexpectedResult)
	}
	if err != nil {
		// the server's verdict on the put, if it failed
		return nil, messageTooLarge(err, c.opts.maxBatchBytes, pp.firstBytes, schema.NumFields())
	}
	if sendErr != nil {
		return nil, sendErr
	}
	extra := 0
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		extra++
	}
	if extra > 0 {
		return nil, fmt.Errorf("%w: the put answered %d results, not 1", ErrUnexpectedResult, extra+1)
	}
	return res.AppMetadata, nil
}

// sendBatch writes rec with the stream's schema (a reader's batches may
// differ from its schema in nullability or metadata only, which the IPC
// writer would refuse) in slices small enough for one message each.
func (c *Client) sendBatch(w *ipcdict.Writer, schema *arrow.Schema, rec arrow.RecordBatch) error {
	if !rec.Schema().Equal(schema) {
		if err := sameTypes(schema, rec.Schema()); err != nil {
			return &ReaderError{Err: err}
		}
		rec = array.NewRecordBatch(schema, rec.Columns(), rec.NumRows())
		defer rec.Release()
	}
	n := rec.NumRows()
	size := util.TotalRecordSize(rec)
	limit := c.opts.maxBatchBytes
	if limit <= 0 || size <= limit || n <= 1 {
		return w.Write(rec)
	}
	step := max(n*limit/size, 1)
	for off := int64(0); off < n; off += step {
		s := rec.NewSlice(off, min(off+step, n))
		err := w.Write(s)
		s.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// putPayloads sends an IPC writer's payloads as the messages of a DoPut,
// the descriptor with the first.
type putPayloads struct {
	stream flight.FlightService_DoPutClient
	desc   *flight.FlightDescriptor
	fd     flight.FlightData
	buf    *bytes.Buffer // from bodyBufs
	// firstBytes is the size of the first message sent (the schema and
	// the descriptor), as the server's message limit counts it; 0 before.
	firstBytes int64
}

// bodyBufs holds the buffers batch bodies are gathered in before they
// are sent (gRPC's marshalling copies them), so that a client's puts do
// not grow a buffer of their own from nothing each time.
var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody bounds the buffers bodyBufs keeps.
const maxPooledBody = 8 << 20

// done gives the body buffer back; p sends nothing after.
func (p *putPayloads) done() {
	if b := p.buf; b != nil && b.Cap() <= maxPooledBody {
		b.Reset()
		bodyBufs.Put(b)
	}
	p.buf = nil
}

func (p *putPayloads) Start() error { return nil }
func (p *putPayloads) Close() error { return nil }

func (p *putPayloads) WritePayload(pl ipc.Payload) error {
	m := pl.Meta()
	defer m.Release()
	p.buf.Reset()
	if err := pl.SerializeBody(p.buf); err != nil {
		return err
	}
	p.fd.FlightDescriptor, p.desc = p.desc, nil
	p.fd.DataHeader, p.fd.DataBody = m.Bytes(), p.buf.Bytes()
	if p.fd.FlightDescriptor != nil {
		p.firstBytes = int64(proto.Size(&p.fd))
	}
	err := p.stream.Send(&p.fd)
	p.fd = flight.FlightData{}
	return err
}

// guardedReader is Put's view of the caller's reader: it notes whether a
// batch was asked for, and its Release leaves the reader to its owner.
type guardedReader struct {
	array.RecordReader
	read bool
}

func (g *guardedReader) Next() bool {
	g.read = true
	return g.RecordReader.Next()
}

func (g *guardedReader) Release() {}

// sameTypes checks that a batch's columns can be sent under the stream's
// schema: the same number of columns, each of the same type.
func sameTypes(schema, got *arrow.Schema) error {
	if got.NumFields() != schema.NumFields() {
		return fmt.Errorf("client: a batch has %d columns, the reader's schema %d", got.NumFields(), schema.NumFields())
	}
	for i, f := range schema.Fields() {
		if g := got.Field(i); !arrow.TypeEqual(f.Type, g.Type) {
			return fmt.Errorf("client: a batch's column %d (%s) is %s, the reader's schema says %s", i, g.Name, g.Type, f.Type)
		}
	}
	return nil
}
