package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/store/filter"
)

// ReadRequest names what to read: a profile, a version, partitions and
// columns.
type ReadRequest struct {
	// Path is the profile, "sales/orders".
	Path string
	// Version is "v3" (or "3"); empty or "latest" is the latest version.
	// It takes the names list-versions answers (VersionSummary.Version).
	Version string
	// Columns projects the read, in this order; nil is every column.
	Columns []string
	// Partition keeps only the hive partitions whose column has one of
	// the values (catalog.HiveNull selects null).
	Partition map[string][]string
	// Filter keeps only the rows for which it is true (nil: every row),
	// e.g. filter.ParseWhere("region = 'eu' and total > 100"). The server
	// prunes partitions and row groups by it before filtering rows.
	Filter *filter.Expr
	// Limit, when not nil, ends the read after this many rows (the first
	// ones in the profile's order).
	Limit *int64
}

func (r ReadRequest) command() ([]byte, error) {
	b, err := json.Marshal(catalog.ReadCommand{Path: r.Path, Version: r.Version, Partition: r.Partition, Columns: r.Columns, Filter: r.Filter, Limit: r.Limit})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.Path, err)
	}
	return b, nil
}

func (r ReadRequest) descriptor() (*flight.FlightDescriptor, error) {
	b, err := r.command()
	if err != nil {
		return nil, err
	}
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b}, nil
}

// Read streams r with one DoGet. The reader's schema is the one the
// profile was put with (projected to r.Columns); its Err after Next
// returns false is the stream's error, a gRPC status when the server
// failed it. Release the reader; releasing it early cancels the stream.
func (c *Client) Read(ctx context.Context, r ReadRequest) (array.RecordReader, error) {
	t, err := r.command()
	if err != nil {
		return nil, err
	}
	return c.readTicket(ctx, t)
}

// ReadEndpoint streams one endpoint of a Plan. Its ticket pins the
// version and files, so it reads the planned snapshot whenever it is
// fetched (NotFound once retention removed that version).
func (c *Client) ReadEndpoint(ctx context.Context, ep *flight.FlightEndpoint) (array.RecordReader, error) {
	return c.ReadTicket(ctx, ep.GetTicket().GetTicket())
}

// ReadTicket streams one DoGet of ticket exactly as given: a profile's
// path ("sales/orders"), a JSON read command, or an endpoint's ticket
// (docs/protocol.md, DoGet) — for a caller that holds a ticket rather
// than a ReadRequest, or that must send a particular form of it. The
// reader is Read's: release it; its Err is the stream's status.
func (c *Client) ReadTicket(ctx context.Context, ticket []byte) (array.RecordReader, error) {
	return c.readTicket(ctx, ticket)
}

func (c *Client) readTicket(ctx context.Context, ticket []byte) (array.RecordReader, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.fc.DoGet(ctx, &flight.Ticket{Ticket: ticket})
	if err != nil {
		cancel()
		return nil, err
	}
	rs := &recvStream{FlightService_DoGetClient: stream}
	fr, err := flight.NewRecordReader(rs, ipc.WithAllocator(c.opts.mem))
	if err != nil {
		cancel()
		return nil, rs.cause(err)
	}
	sr := &streamReader{Reader: fr, rs: rs, cancel: cancel}
	sr.refs.Store(1)
	return sr, nil
}

// recvStream remembers the stream's own error: the IPC reader may wrap
// it, and callers should see the server's status unchanged.
type recvStream struct {
	flight.FlightService_DoGetClient
	err error
}

func (r *recvStream) Recv() (*flight.FlightData, error) {
	d, err := r.FlightService_DoGetClient.Recv()
	if err != nil && !errors.Is(err, io.EOF) && r.err == nil {
		r.err = err
	}
	return d, err
}

func (r *recvStream) cause(err error) error {
	if r.err != nil {
		return r.err
	}
	return err
}

// streamReader is a DoGet's reader; releasing it cancels the stream.
type streamReader struct {
	*flight.Reader
	rs     *recvStream
	cancel context.CancelFunc
	refs   atomic.Int64
}

func (s *streamReader) Retain() { s.refs.Add(1) }

func (s *streamReader) Release() {
	if s.refs.Add(-1) == 0 {
		s.Reader.Release()
		s.cancel()
	}
}

func (s *streamReader) Err() error {
	if err := s.Reader.Err(); err != nil {
		return s.rs.cause(err)
	}
	return nil
}

// Plan is a read resolved by the server to one snapshot (GetFlightInfo):
// its schema, totals and endpoints, in order. Every endpoint's ticket pins
// the version and files, so fetching them — in parallel, or later — reads
// that snapshot even while new versions are written.
type Plan struct {
	// Schema is the schema every endpoint streams.
	Schema *arrow.Schema
	// TotalRecords and TotalBytes are the snapshot's totals.
	TotalRecords, TotalBytes int64
	// Endpoints are the parts of the read, in index order; there is
	// always at least one.
	Endpoints []*flight.FlightEndpoint
	// Info is the server's FlightInfo.
	Info *flight.FlightInfo
}

// Plan resolves r to one snapshot (GetFlightInfo).
func (c *Client) Plan(ctx context.Context, r ReadRequest) (*Plan, error) {
	d, err := r.descriptor()
	if err != nil {
		return nil, err
	}
	info, err := c.fc.GetFlightInfo(ctx, d)
	if err != nil {
		return nil, err
	}
	sc, err := flight.DeserializeSchema(info.GetSchema(), c.opts.mem)
	if err != nil {
		return nil, fmt.Errorf("%w: the server's schema: %w", ErrUnexpectedResult, err)
	}
	return &Plan{Schema: sc, TotalRecords: info.GetTotalRecords(), TotalBytes: info.GetTotalBytes(), Endpoints: info.GetEndpoint(), Info: info}, nil
}

// Schema is the schema a read of r streams (GetSchema): the one the
// profile was put with, projected to r.Columns.
func (c *Client) Schema(ctx context.Context, r ReadRequest) (*arrow.Schema, error) {
	d, err := r.descriptor()
	if err != nil {
		return nil, err
	}
	res, err := c.fc.GetSchema(ctx, d)
	if err != nil {
		return nil, err
	}
	sc, err := flight.DeserializeSchema(res.GetSchema(), c.opts.mem)
	if err != nil {
		return nil, fmt.Errorf("%w: the server's schema: %w", ErrUnexpectedResult, err)
	}
	return sc, nil
}

// ReadParallel fetches the endpoints of p, up to parallel at once (0:
// DefaultParallel), and returns their batches as one reader, in endpoint
// order. Each endpoint buffers a few batches ahead: a slow consumer holds
// the fetchers back rather than memory growing. The first endpoint that
// fails ends the read with its error (Err). Releasing the reader stops
// the fetchers.
func (c *Client) ReadParallel(ctx context.Context, p *Plan, parallel int) (array.RecordReader, error) {
	if p == nil || p.Schema == nil {
		return nil, errors.New("client: ReadParallel needs a Plan")
	}
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &parallelReader{schema: p.Schema, cancel: cancel, parts: make([]*part, len(p.Endpoints))}
	r.refs.Store(1)
	for i := range r.parts {
		r.parts[i] = &part{recs: make(chan arrow.RecordBatch, 8)}
	}
	sem := make(chan struct{}, parallel)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		// Fetchers start in endpoint order, so the one being read is
		// always running: no deadlock however slow the consumer is.
		for i, ep := range p.Endpoints {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				for _, pt := range r.parts[i:] {
					pt.err = ctx.Err()
					close(pt.recs)
				}
				return
			}
			r.wg.Add(1)
			go func(pt *part, ep *flight.FlightEndpoint) {
				defer r.wg.Done()
				defer func() { <-sem }()
				defer close(pt.recs)
				pt.err = c.fetch(ctx, ep, pt.recs)
			}(r.parts[i], ep)
		}
	}()
	return r, nil
}

// fetch reads one endpoint into out.
func (c *Client) fetch(ctx context.Context, ep *flight.FlightEndpoint, out chan<- arrow.RecordBatch) error {
	rdr, err := c.ReadEndpoint(ctx, ep)
	if err != nil {
		return err
	}
	defer rdr.Release()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		rec.Retain()
		select {
		case out <- rec:
		case <-ctx.Done():
			rec.Release()
			return ctx.Err()
		}
	}
	return rdr.Err()
}

type part struct {
	recs chan arrow.RecordBatch
	err  error // set before recs is closed
}

// parallelReader hands out the parts' batches in order.
type parallelReader struct {
	refs   atomic.Int64
	schema *arrow.Schema
	parts  []*part
	i      int
	cur    arrow.RecordBatch
	err    error
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

func (r *parallelReader) Schema() *arrow.Schema { return r.schema }

func (r *parallelReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	for r.err == nil && r.i < len(r.parts) {
		pt := r.parts[r.i]
		if rec, ok := <-pt.recs; ok {
			r.cur = rec
			return true
		}
		r.err = pt.err
		r.i++
	}
	return false
}

func (r *parallelReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is RecordBatch, for the deprecated name of the interface.
func (r *parallelReader) Record() arrow.RecordBatch { return r.cur } //nolint:staticcheck // interface

func (r *parallelReader) Err() error { return r.err }

func (r *parallelReader) Retain() { r.refs.Add(1) }

// Release stops the fetchers and releases what they buffered.
func (r *parallelReader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	r.once.Do(func() {
		if r.cur != nil {
			r.cur.Release()
			r.cur = nil
		}
		r.cancel()
		for _, pt := range r.parts {
			for rec := range pt.recs {
				rec.Release()
			}
		}
		r.wg.Wait()
	})
}

// Profile is one profile ListFlights answered.
type Profile struct {
	// Keys name the profile; Path is them joined with "/".
	Keys []string
	Path string
	// TotalRecords and TotalBytes are those of its latest version, -1
	// when the server could not plan it (a corrupt manifest, say).
	TotalRecords, TotalBytes int64
	// Info is the server's FlightInfo: the latest schema and endpoints.
	Info *flight.FlightInfo
}

// List lists the profiles under a key prefix (matched component by
// component: "sales" matches sales/orders, not salesman/x; "" is every
// profile), in lexical order.
func (c *Client) List(ctx context.Context, prefix string) ([]Profile, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.fc.ListFlights(ctx, &flight.Criteria{Expression: []byte(prefix)})
	if err != nil {
		return nil, err
	}
	var out []Profile
	for {
		fi, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		d := fi.GetFlightDescriptor()
		if d == nil {
			continue
		}
		out = append(out, Profile{Keys: d.Path, Path: strings.Join(d.Path, "/"),
			TotalRecords: fi.GetTotalRecords(), TotalBytes: fi.GetTotalBytes(), Info: fi})
	}
}
