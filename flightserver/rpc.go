package flightserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/internal/ipcdict"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/codec"
	"github.com/quiverdb/quiver/store/ipccache"
)

// validatingReader checks every batch of a DoPut before the store sees it
// (array.ValidateRecordFull: offsets, lengths, buffer sizes, UTF-8, child
// arrays; and no null in a non-nullable top-level column), and counts the
// rows for the log line. A bad batch ends the stream with
// catalog.ErrInvalid: the store then commits nothing.
type validatingReader struct {
	*putReader
	s   *Server
	ri  *rpcInfo
	rs  *recvErrStream
	n   int
	err error
}

func (r *validatingReader) Next() bool {
	if r.err != nil || !r.putReader.Next() {
		return false
	}
	rec := r.putReader.RecordBatch()
	r.n++
	if err := validateBatch(rec, int64(r.rs.lastBody)+r.rs.decoded.n.Load()); err != nil {
		r.err = fmt.Errorf("%w: batch %d of the stream is malformed: %v", catalog.ErrInvalid, r.n, err)
		return false
	}
	r.ri.rows.Add(rec.NumRows())
	if r.n == 1 {
		r.s.hook("DoPut")
	}
	return true
}

// Err is the validation error, else the reader's.
func (r *validatingReader) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.Reader.Err()
}

// slackRows is how many rows a batch may claim beyond what its body could
// hold at one bit per row (see validateBatch).
const slackRows = 1 << 16

// validateBatch checks what only the transport can: the row count against
// the message's size, dataBytes: its body plus what decoding it allocated
// (the declared uncompressed sizes of compressed buffers, which the
// in-flight budget charged; nothing for an uncompressed body, whose
// buffers are slices of it). Every column but a null-typed one costs at
// least a bit per row, while the row count is a free number the writer
// would spend memory on per row (a null column of 2^40 rows is otherwise
// valid, and costs nothing until Parquet's levels are built). Judged by
// the compressed body alone, a well-compressed valid batch (a column of
// zeros) would be refused. The full validation of every column (offsets,
// lengths, nulls in non-nullable fields at any depth) is the store's,
// before anything reaches an encoder (codec.ValidateBatch), so that every
// way into the store gets it once.
func validateBatch(rec arrow.RecordBatch, dataBytes int64) error {
	if rows := rec.NumRows(); rows < 0 || rows > 8*dataBytes+slackRows {
		return fmt.Errorf("it claims %d rows in %d bytes of data", rows, dataBytes)
	}
	for i, col := range rec.Columns() {
		if int64(col.Len()) != rec.NumRows() {
			return fmt.Errorf("column %d has %d rows, the batch %d", i, col.Len(), rec.NumRows())
		}
	}
	return nil
}

// DoPut streams one put (an append by default, a write with mode "write")
// into the profile the descriptor names and answers exactly one PutResult
// whose app_metadata is the JSON commit record. A stream that fails or is
// cancelled commits nothing. Before the store sees anything, the schema is
// checked against the column and depth limits (on the message bytes, then
// parsed) and every batch is validated; buffers the IPC reader allocates
// (decompression) are charged to the in-flight budget.
func (s *Server) DoPut(stream flight.FlightService_DoPutServer) error {
	ctx := stream.Context()
	ri := info(ctx)
	rs := &recvErrStream{FlightService_DoPutServer: stream, s: s, ri: ri}
	mem := s.opts.mem
	var ba *budgetAllocator
	if s.budget != nil {
		ba = &budgetAllocator{Allocator: mem, b: s.budget, ctx: ctx}
		defer ba.close() // after the reader's Release below
		mem = ba
	}
	rs.decoded.Allocator = mem
	rdr, err := newPutReader(rs, ipc.WithAllocator(&rs.decoded))
	if err != nil {
		if rs.limit != nil {
			return fail(ctx, rs.limit)
		}
		cause := rs.cause(err)
		if _, ok := status.FromError(unwrapStatus(cause)); !ok {
			// Not the transport's failure: the first message was not a
			// valid schema.
			cause = fmt.Errorf("%w: DoPut stream did not start with a valid schema message: %v", catalog.ErrInvalid, err)
		}
		return fail(ctx, s.streamError(cause, "DoPut stream did not start with a schema"))
	}
	defer rdr.Release()
	if err := s.checkSchema(rdr.Schema()); err != nil {
		return fail(ctx, err)
	}
	req, err := catalog.ParseDescriptor(rdr.LatestFlightDescriptor())
	if err == nil {
		err = req.CheckPut()
	}
	if err != nil {
		return fail(ctx, err)
	}
	ri.profile.Store(req.Path())
	if err := s.allow(ctx, "DoPut", req.Keys); err != nil {
		return err
	}
	opts := req.PutOptions()
	id := IdentityFrom(ctx)
	opts.Writer = id.Name // who wrote it goes into the commit record
	// An anonymous client is named by its address, which a retry may not
	// share (a restarted pod, NAT, ::1 vs 127.0.0.1): its ids are matched
	// by the id alone.
	opts.WriterUnstable = id.Anonymous
	vr := &validatingReader{putReader: rdr, s: s, ri: ri, rs: rs}
	cr, err := s.st.Put(ctx, req.Keys, vr, opts)
	if err == nil && vr.Err() != nil {
		// The store checks the reader itself; this guards the contract.
		err = fmt.Errorf("put %s: %w", req.Path(), vr.Err())
	}
	if err != nil {
		switch {
		case rs.limit != nil:
			return fail(ctx, rs.limit)
		case ba != nil && ba.busy.Load() != nil:
			return fail(ctx, *ba.busy.Load())
		case ba != nil && ba.exceeded.Load():
			s.metrics.limitRefusals.WithLabelValues("decode").Inc()
			return fail(ctx, status.Errorf(codes.ResourceExhausted,
				"put %s: a batch decompresses to more than the server's in-flight budget has room for (%d bytes, --max-inflight-bytes); send smaller batches; nothing was committed",
				req.Path(), s.budget.capacity))
		case vr.err != nil && !errors.Is(err, vr.err):
			// The store reported the stream's failure its own way; the
			// client learns what was wrong with its batch.
			return fail(ctx, fmt.Errorf("put %s: %w", req.Path(), vr.err))
		}
		return s.failed(ctx, s.streamError(rs.cause(err), "put "+req.Path()))
	}
	if !cr.Replayed {
		s.metrics.commit(string(cr.Mode))
	} else {
		// The log counts what this stream carried; nothing was written.
		s.opts.log.Info().Str("profile", req.Path()).Str("request_id", cr.RequestID).Msg("put replayed from request id")
	}
	// The commit record exactly as the log stores it.
	b, err := []byte(cr.Line()), error(nil)
	if b == nil {
		b, err = json.Marshal(catalog.PutResultFrom(cr))
	}
	if err != nil {
		return fail(ctx, fmt.Errorf("encode put result: %w", err))
	}
	if err := stream.Send(&flight.PutResult{AppMetadata: b}); err != nil {
		return fail(ctx, fmt.Errorf("send put result: %w", err))
	}
	return nil
}

// recvErrStream remembers the transport's own receive error: the IPC
// reader reports it with %v, losing its gRPC status (a message over the
// size limit must stay ResourceExhausted, not become Internal). It checks
// the schema of every schema message against the column and depth limits
// before the IPC reader parses it (limit), and counts the IPC message
// bytes received for the log line.
type recvErrStream struct {
	flight.FlightService_DoPutServer
	s     *Server
	ri    *rpcInfo
	err   error
	limit error
	// lastBody is the body size of the last message received: the batch
	// the IPC reader returns next was decoded from it.
	lastBody int
	// decoded is the IPC reader's allocator; it counts what decoding the
	// last message received allocated (decompressed buffers).
	decoded countingAllocator
}

// countingAllocator counts the bytes allocated through it since the count
// was last reset (each received message).
type countingAllocator struct {
	memory.Allocator
	n atomic.Int64
}

// Allocate implements memory.Allocator.
func (a *countingAllocator) Allocate(size int) []byte {
	if size > 0 {
		a.n.Add(int64(size))
	}
	return a.Allocator.Allocate(size)
}

// Reallocate implements memory.Allocator.
func (a *countingAllocator) Reallocate(size int, b []byte) []byte {
	if d := size - len(b); d > 0 {
		a.n.Add(int64(d))
	}
	return a.Allocator.Reallocate(size, b)
}

// recv receives the next message, and the pooled buffer its fields alias
// (nil if none: recvPool).
func (r *recvErrStream) recv() (*flight.FlightData, *recvBuf, error) {
	if r.limit != nil {
		return nil, nil, r.limit
	}
	fd := &flight.FlightData{}
	pooledFor.Store(fd, (*recvBuf)(nil))
	err := r.FlightService_DoPutServer.RecvMsg(fd)
	v, _ := pooledFor.LoadAndDelete(fd)
	rb, _ := v.(*recvBuf)
	if err == nil {
		err = r.check(fd)
	} else if !errors.Is(err, io.EOF) && r.err == nil {
		r.err = err
	}
	if err != nil {
		if rb != nil {
			rb.put()
		}
		return nil, nil, err
	}
	return fd, rb, nil
}

// check checks a received message d before the IPC reader sees it.
func (r *recvErrStream) check(d *flight.FlightData) error {
	if err := malformedFlightData(d); err != nil {
		r.limit = err
		return err
	}
	r.ri.bytes.Add(int64(len(d.DataHeader) + len(d.DataBody)))
	r.lastBody = len(d.DataBody)
	r.decoded.n.Store(0)
	if len(d.DataHeader) == 0 && len(d.AppMetadata) > 0 {
		// The abort contract (docs/protocol.md): a client that cannot
		// cancel its stream (pyarrow) sends app_metadata alone to make
		// the put fail rather than commit what it sent so far.
		r.limit = status.Error(codes.Canceled, "the client aborted the put (a message with app_metadata and no data); nothing was committed")
		return r.limit
	}
	if err := r.s.checkSchemaMessage(d.DataHeader); err != nil {
		if status.Code(err) == codes.ResourceExhausted {
			r.s.metrics.limitRefusals.WithLabelValues(limitName(err)).Inc()
		}
		r.limit = err
		return err
	}
	// The IPC reader slices the body by the buffers the header declares
	// without a bound check of its own (codec.CheckBatchBody).
	if err := codec.CheckBatchBody(d.DataHeader, len(d.DataBody)); err != nil {
		r.limit = status.Errorf(codes.InvalidArgument, "malformed batch message: %v", err)
		return r.limit
	}
	return nil
}

// limitName is the metric label of a schema limit error.
func limitName(err error) string {
	if strings.Contains(status.Convert(err).Message(), "--max-depth") {
		return "depth"
	}
	return "columns"
}

// cause is err, or the receive error behind it when that carries a gRPC
// status and err lost it.
func (r *recvErrStream) cause(err error) error {
	if r.err == nil {
		return err
	}
	if _, ok := status.FromError(unwrapStatus(err)); ok {
		return err
	}
	if _, ok := status.FromError(r.err); ok {
		return r.err
	}
	return err
}

// streamError gives transport errors a message a client can act on.
func (s *Server) streamError(err error, what string) error {
	if st, ok := status.FromError(unwrapStatus(err)); ok && st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max") {
		return status.Errorf(codes.ResourceExhausted,
			"%s: a message exceeds the server's limit of %d bytes (%s); send smaller batches or raise --max-recv-msg-size",
			what, s.opts.maxRecv, st.Message())
	}
	if errors.Is(err, io.EOF) && clientStream(err) {
		return fmt.Errorf("%w: %s", catalog.ErrInvalid, what)
	}
	return err
}

// clientStream reports whether err's io.EOF is the client's: its stream
// ended where a message was due (the store's ErrBadStream). An io.EOF
// from anything else on the put's path — a file of the store read back,
// the spill — is the server's, and answered as its (Internal, the cause
// in the log): blamed on the client, it was INVALID_ARGUMENT "put p"
// with no cause anywhere (red team round 44). Damage on storage is never
// the client's, whatever it wraps.
func clientStream(err error) bool {
	return errors.Is(err, store.ErrBadStream) && !storeDamage(err)
}

// storeDamage reports whether err is the store's report of damage on
// storage. Such an error may carry an io.EOF of its own (a parser's, at
// the end of a damaged file), which is no end of the client's stream: it
// must reach the client as DATA_LOSS, not as a bad request.
func storeDamage(err error) bool {
	var ce *store.CorruptionError
	return errors.As(err, &ce) || errors.Is(err, store.ErrDataLoss)
}

// unwrapStatus finds a gRPC status error in err's chain.
func unwrapStatus(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := e.(interface{ GRPCStatus() *status.Status }); ok {
			return e
		}
	}
	return err
}

// DoGet streams the read a ticket names: a bare path or JSON (path, version,
// partition, columns, files). Partitions are pruned before any file is
// opened; each message stays under the send limit. Files are decoded ahead
// of the send on their own goroutines (the store's read ahead); a file the
// IPC cache holds is sent as the messages it stores, without decoding or
// re-encoding them.
func (s *Server) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) (err error) {
	ctx := stream.Context()
	ri := info(ctx)
	req, err := catalog.ParseTicket(tkt.GetTicket())
	if err != nil {
		return fail(ctx, err)
	}
	ri.profile.Store(req.Path())
	if err := s.allowRead(ctx, "DoGet", req); err != nil {
		return err
	}
	rdr, err := s.openRead(ctx, req)
	if err != nil {
		return fail(ctx, err)
	}
	defer rdr.Release()
	out := &sendCounter{FlightService_DoGetServer: stream, ri: ri}
	// The schema goes first, sent here so that cached messages may follow
	// it before the IPC writer has written anything; the writer's own
	// schema message is then dropped.
	sp := ipc.GetSchemaPayload(rdr.Schema(), s.opts.mem)
	meta := sp.Meta()
	err = out.Send(&flight.FlightData{DataHeader: meta.Bytes()})
	meta.Release()
	sp.Release()
	if err != nil {
		return fail(ctx, fmt.Errorf("send %s: %w", req.Path(), err))
	}
	// Without dictionaries a batch is sent as one message of its own
	// buffers (sendCodec); with them the IPC writer sends the dictionary
	// messages that must come first.
	direct := ipccache.Cacheable(rdr.Schema())
	// ipcdict's writer: arrow-go's does not send a float dictionary
	// within 1e-5 of the last one sent (red team round 10's d01: 0.0
	// read back as -0.0).
	w := ipcdict.NewWriter(&payloadSender{out: out}, rdr.Schema(), true, ipc.WithAllocator(s.opts.mem))
	defer func() {
		if cerr := w.Close(); cerr != nil && err == nil {
			err = fail(ctx, fmt.Errorf("close stream of %s: %w", req.Path(), cerr))
		}
	}()
	limit := s.sendTarget()
	for rdr.Next() {
		if err := ctx.Err(); err != nil {
			return fail(ctx, err)
		}
		if meta, body, rows, ok := rdr.Message(); ok && int64(len(meta)+len(body)) <= limit {
			if err := out.sendMessage(&dataMessage{header: meta, body: [][]byte{body}, release: rdr.Hold()}); err != nil {
				return fail(ctx, fmt.Errorf("send %s: %w", req.Path(), err))
			}
			ri.rows.Add(rows)
		} else {
			rec := rdr.RecordBatch()
			if rec == nil {
				break // rdr.Err says why
			}
			write := w.Write
			if direct {
				write = func(rec arrow.RecordBatch) error { return s.sendBatch(out, rec, rdr.Hold()) }
			}
			if err := s.writeSliced(write, rec, ri); err != nil {
				return fail(ctx, fmt.Errorf("send %s: %w", req.Path(), err))
			}
		}
		s.hook("DoGet")
	}
	if err := rdr.Err(); err != nil {
		return fail(ctx, err)
	}
	return nil
}

// sendBatch sends one batch as a message of its own buffers; hold is
// released once gRPC is done with them. The batch itself is kept until
// then too: the IPC payload of a sliced batch (a filter's rows, a batch
// cut under the message limit) points into its buffers without counting
// a reference, and the read pool reuses freed buffers (red team round 7:
// a filtered read sent another batch's bytes).
func (s *Server) sendBatch(out *sendCounter, rec arrow.RecordBatch, hold func()) error {
	rec.Retain()
	held := hold
	hold = func() {
		held()
		rec.Release()
	}
	pl, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(s.opts.mem))
	if err != nil {
		hold()
		return fmt.Errorf("encode batch: %w", err)
	}
	m, err := payloadMessage(&pl, hold)
	if err != nil {
		pl.Release()
		hold()
		return fmt.Errorf("encode batch: %w", err)
	}
	return out.sendMessage(m)
}

// payloadSender sends an IPC writer's payloads as Flight messages. The body is
// gathered into one reused buffer: gRPC has copied it when Send returns.
type payloadSender struct {
	out flight.DataStreamWriter
	fd  flight.FlightData
	buf bytes.Buffer
}

func (p *payloadSender) Start() error { return nil }
func (p *payloadSender) Close() error { return nil }

func (p *payloadSender) WritePayload(pl ipc.Payload) error {
	m := pl.Meta()
	defer m.Release()
	p.buf.Reset()
	if err := pl.SerializeBody(&p.buf); err != nil {
		return err
	}
	p.fd.DataHeader, p.fd.DataBody = m.Bytes(), p.buf.Bytes()
	err := p.out.Send(&p.fd)
	p.fd.DataHeader, p.fd.DataBody = nil, nil
	if p.buf.Cap() > 4*maxKeptBuffer {
		p.buf = bytes.Buffer{} // do not keep a giant's buffer
	}
	return err
}

// maxKeptBuffer is the message buffer size a DoGet keeps between batches.
const maxKeptBuffer = 8 << 20

// sendTarget is the size DoGet keeps a message's buffers under: ¾ of the
// send limit, leaving room for IPC metadata and padding.
func (s *Server) sendTarget() int64 { return int64(s.opts.maxSend) * 3 / 4 }

// sendCounter counts the IPC message bytes (metadata and body) a DoGet
// sent, for the log line and the metrics.
type sendCounter struct {
	flight.FlightService_DoGetServer
	ri *rpcInfo
}

func (c *sendCounter) Send(d *flight.FlightData) error {
	if err := c.FlightService_DoGetServer.Send(d); err != nil {
		return err
	}
	c.ri.bytes.Add(int64(len(d.DataHeader) + len(d.DataBody)))
	return nil
}

// sendMessage sends a dataMessage (sendCodec encodes it), releasing it
// when gRPC never took it.
func (c *sendCounter) sendMessage(m *dataMessage) error {
	n := len(m.header)
	for _, b := range m.body {
		n += len(b)
	}
	err := c.FlightService_DoGetServer.SendMsg(m)
	m.abandon()
	if err != nil {
		return err
	}
	c.ri.bytes.Add(int64(n))
	return nil
}

// writeSliced writes rec as slices whose buffers total at most the send
// target, each cut where its own rows' bytes reach it (sliceEnd): cutting
// into equal numbers of rows sent a batch whose first rows were small
// and last ones large as messages of 20 MiB (red team round 16's i01). A
// single row larger than the target is sent alone.
func (s *Server) writeSliced(write func(arrow.RecordBatch) error, rec arrow.RecordBatch, ri *rpcInfo) error {
	rows := rec.NumRows()
	size := recordSize(rec)
	ri.rows.Add(rows)
	target := s.sendTarget()
	if size <= target || rows <= 1 {
		return write(rec)
	}
	for off := int64(0); off < rows; {
		end := sliceEnd(rec, off, target)
		sl := rec.NewSlice(off, end)
		off = end
		err := write(sl)
		sl.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// GetFlightInfo plans a read: the schema, totals, and endpoints whose
// tickets pin the version and the exact committed files.
func (s *Server) GetFlightInfo(ctx context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	s.hook("GetFlightInfo")
	req, err := catalog.ParseDescriptor(desc)
	if err != nil {
		return nil, fail(ctx, err)
	}
	info(ctx).profile.Store(req.Path())
	if err := s.allowRead(ctx, "GetFlightInfo", req); err != nil {
		return nil, err
	}
	fi, err := s.cat.Plan(ctx, req, desc)
	if err != nil {
		return nil, fail(ctx, err)
	}
	info(ctx).rows.Store(fi.TotalRecords)
	info(ctx).bytes.Store(fi.TotalBytes)
	return fi, nil
}

// GetSchema answers the schema of the latest (or the descriptor's) version,
// projected to the descriptor's columns: the schema DoGet streams.
func (s *Server) GetSchema(ctx context.Context, desc *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	req, err := catalog.ParseDescriptor(desc)
	if err != nil {
		return nil, fail(ctx, err)
	}
	info(ctx).profile.Store(req.Path())
	if err := s.allowRead(ctx, "GetSchema", req); err != nil {
		return nil, err
	}
	var sc *arrow.Schema
	if req.Multi != nil {
		sc, err = s.cat.MultiSchema(ctx, req)
	} else {
		_, sc, err = s.cat.Snapshot(ctx, req)
	}
	if err != nil {
		return nil, fail(ctx, err)
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(sc, s.opts.mem)}, nil
}

// ListFlights answers one FlightInfo per profile under the criteria's key
// prefix (component by component; empty lists every profile) that the
// caller may read; profiles outside its key prefixes are left out.
func (s *Server) ListFlights(c *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	ctx := stream.Context()
	prefix, err := catalog.ParsePrefix(string(c.GetExpression()))
	if err != nil {
		return fail(ctx, err)
	}
	info(ctx).profile.Store(string(c.GetExpression()))
	if id := IdentityFrom(ctx); id == nil || id.Role < RoleRead {
		return s.allow(ctx, "ListFlights", prefix)
	}
	for _, p := range readable(ctx, prefix) {
		err = s.cat.List(ctx, p, func(fi *flight.FlightInfo) error {
			info(ctx).rows.Add(1)
			return stream.Send(fi)
		})
		if err != nil {
			return fail(ctx, err)
		}
	}
	return nil
}

// ListActions answers the admin actions of DESIGN.md §3.1.
func (s *Server) ListActions(_ *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, a := range catalog.ActionTypes {
		if err := stream.Send(a); err != nil {
			return fail(stream.Context(), err)
		}
	}
	return nil
}

// recordSize is the total length of a batch's buffers (shared buffers
// counted once per use), an upper bound of its IPC body.
func recordSize(rec arrow.RecordBatch) int64 {
	var n int64
	for _, col := range rec.Columns() {
		n += dataSize(col.Data())
	}
	return n
}

func dataSize(d arrow.ArrayData) int64 {
	if d == nil {
		return 0
	}
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataSize(c)
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		n += dataSize(d.Dictionary())
	}
	return n
}
