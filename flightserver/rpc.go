package flightserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
)

// countingReader counts what a DoPut stream carried, for the log line.
type countingReader struct {
	*flight.Reader
	ri *rpcInfo
}

func (r *countingReader) Next() bool {
	if !r.Reader.Next() {
		return false
	}
	rec := r.Reader.RecordBatch()
	r.ri.rows.Add(rec.NumRows())
	r.ri.bytes.Add(recordSize(rec))
	return true
}

// DoPut streams one put (an append by default, a write with mode "write")
// into the profile the descriptor names and answers exactly one PutResult
// whose app_metadata is the JSON commit record. A stream that fails or is
// cancelled commits nothing.
func (s *Server) DoPut(stream flight.FlightService_DoPutServer) error {
	ctx := stream.Context()
	ri := info(ctx)
	rs := &recvErrStream{FlightService_DoPutServer: stream}
	rdr, err := flight.NewRecordReader(rs, ipc.WithAllocator(s.opts.mem))
	if err != nil {
		cause := rs.cause(err)
		if _, ok := status.FromError(unwrapStatus(cause)); !ok {
			// Not the transport's failure: the first message was not a
			// valid schema.
			cause = fmt.Errorf("%w: DoPut stream did not start with a valid schema message: %v", catalog.ErrInvalid, err)
		}
		return fail(ctx, s.streamError(cause, "DoPut stream did not start with a schema"))
	}
	defer rdr.Release()
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
	opts.Writer = IdentityFrom(ctx).Name // who wrote it goes into the commit record
	cr, err := s.st.Put(ctx, req.Keys, &countingReader{Reader: rdr, ri: ri}, opts)
	if err == nil && rdr.Err() != nil {
		// The store checks the reader itself; this guards the contract.
		err = fmt.Errorf("put %s: %w", req.Path(), rdr.Err())
	}
	if err != nil {
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
// size limit must stay ResourceExhausted, not become Internal).
type recvErrStream struct {
	flight.FlightService_DoPutServer
	err error
}

func (r *recvErrStream) Recv() (*flight.FlightData, error) {
	d, err := r.FlightService_DoPutServer.Recv()
	if err != nil && !errors.Is(err, io.EOF) && r.err == nil {
		r.err = err
	}
	return d, err
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
	if st, ok := status.FromError(unwrapStatus(err)); ok && st.Code() == codes.ResourceExhausted {
		return status.Errorf(codes.ResourceExhausted,
			"%s: a message exceeds the server's limit of %d bytes (%s); send smaller batches or raise --max-recv-msg-size",
			what, s.opts.maxRecv, st.Message())
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s", catalog.ErrInvalid, what)
	}
	return err
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
// opened; each message stays under the send limit.
func (s *Server) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) (err error) {
	ctx := stream.Context()
	ri := info(ctx)
	req, err := catalog.ParseTicket(tkt.GetTicket())
	if err != nil {
		return fail(ctx, err)
	}
	ri.profile.Store(req.Path())
	if err := s.allow(ctx, "DoGet", req.Keys); err != nil {
		return err
	}
	rdr, _, err := s.cat.Open(ctx, req)
	if err != nil {
		return fail(ctx, err)
	}
	defer rdr.Release()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rdr.Schema()), ipc.WithAllocator(s.opts.mem))
	defer func() {
		if cerr := w.Close(); cerr != nil && err == nil {
			err = fail(ctx, fmt.Errorf("close stream of %s: %w", req.Path(), cerr))
		}
	}()
	for rdr.Next() {
		if err := ctx.Err(); err != nil {
			return fail(ctx, err)
		}
		if err := s.writeSliced(w, rdr.RecordBatch(), ri); err != nil {
			return fail(ctx, fmt.Errorf("send %s: %w", req.Path(), err))
		}
	}
	if err := rdr.Err(); err != nil {
		return fail(ctx, err)
	}
	return nil
}

// writeSliced writes rec as slices whose buffers total at most ¾ of the
// send limit, leaving room for IPC metadata and padding. A single row
// larger than that is sent alone.
func (s *Server) writeSliced(w *flight.Writer, rec arrow.RecordBatch, ri *rpcInfo) error {
	rows := rec.NumRows()
	size := recordSize(rec)
	ri.rows.Add(rows)
	ri.bytes.Add(size)
	target := int64(s.opts.maxSend) * 3 / 4
	if size <= target || rows <= 1 {
		return w.Write(rec)
	}
	parts := (size + target - 1) / target
	step := (rows + parts - 1) / parts
	for off := int64(0); off < rows; off += step {
		end := min(off+step, rows)
		sl := rec.NewSlice(off, end)
		err := w.Write(sl)
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
	req, err := catalog.ParseDescriptor(desc)
	if err != nil {
		return nil, fail(ctx, err)
	}
	info(ctx).profile.Store(req.Path())
	if err := s.allow(ctx, "GetFlightInfo", req.Keys); err != nil {
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
	if err := s.allow(ctx, "GetSchema", req.Keys); err != nil {
		return nil, err
	}
	_, sc, err := s.cat.Snapshot(ctx, req)
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
