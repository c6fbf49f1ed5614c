package flightserver

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiverdb/quiver/catalog"
)

// streamReader is what DoGet streams: a store.SnapshotReader, or a
// catalog.MultiReader for a read of several profiles.
type streamReader interface {
	array.RecordReader
	// Message is the current batch as a cache entry's IPC message, when it
	// is one (ok false otherwise).
	Message() (meta, body []byte, rows int64, ok bool)
	// Hold keeps the current batch's memory until the function is called.
	Hold() func()
}

// allowRead checks that the caller may read every profile of a request:
// one, or each of several (a prefix is resolved to its profiles first, so
// an identity limited to key prefixes cannot read past them).
func (s *Server) allowRead(ctx context.Context, op string, req *catalog.Request) error {
	if req.Multi == nil {
		return s.allow(ctx, op, req.Keys)
	}
	if req.Multi.Prefix != nil {
		// Listing the prefix is itself a read of what is under it.
		if err := s.allow(ctx, op, req.Multi.Prefix); err != nil {
			return err
		}
	}
	profiles, err := s.cat.Resolve(ctx, req)
	if err != nil {
		return fail(ctx, err)
	}
	for _, keys := range profiles {
		if err := s.allow(ctx, op, keys); err != nil {
			return err
		}
	}
	return nil
}

// openRead opens the reader of a read request.
func (s *Server) openRead(ctx context.Context, req *catalog.Request) (streamReader, error) {
	if req.Multi != nil {
		mr, err := s.cat.OpenMulti(ctx, req)
		if err != nil {
			return nil, err
		}
		return mr, nil
	}
	rdr, _, err := s.cat.Open(ctx, req)
	if err != nil {
		return nil, err
	}
	return rdr, nil
}
