package flightserver

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
)

// statusOf maps an error of the catalog or store to a gRPC status. The
// store's messages name profiles by key, never by server path; a corruption
// error carries a data-dir-relative path, which is reported only as a
// generic internal error.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	return capMessage(statusOfUncapped(err))
}

// maxMessage caps a status message: messages may quote a client's own
// bytes (field names, keys), which are not worth sending back in bulk.
const maxMessage = 2048

func capMessage(err error) error {
	st, ok := status.FromError(err)
	if !ok || len(st.Message()) <= maxMessage {
		return err
	}
	return status.Error(st.Code(), st.Message()[:maxMessage]+"…")
}

func statusOfUncapped(err error) error {
	if _, ok := status.FromError(err); ok {
		// Already a status (or wraps one, e.g. a message-too-large error
		// from the transport surfaced through the IPC reader).
		st, _ := status.FromError(err)
		if st.Code() != codes.Unknown {
			return st.Err()
		}
	}
	var corrupt *store.CorruptionError
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, catalog.ErrUnknownAction):
		return status.Error(codes.Unimplemented, err.Error())
	case errors.Is(err, fsys.ErrUnsafePath):
		return status.Error(codes.InvalidArgument, "the profile's path passes through a symbolic link or leaves the data directory; Quiver never follows links")
	case errors.Is(err, catalog.ErrInvalid), errors.Is(err, store.ErrInvalidKey), errors.Is(err, store.ErrInvalidArgument),
		errors.Is(err, store.ErrSchemaMismatch), errors.Is(err, store.ErrNestedProfile):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrVersionNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrFormatMismatch):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, store.ErrLockTimeout), errors.Is(err, store.ErrUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, fsys.ErrTooLarge):
		return status.Error(codes.DataLoss, fmt.Sprintf("corrupt file in the store (a metadata file larger than %d MiB, more than Quiver ever writes); run the verify action", fsys.MaxReadFile>>20))
	case errors.Is(err, store.ErrDataLoss):
		return status.Error(codes.DataLoss, err.Error())
	case errors.Is(err, store.ErrTooLarge):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return status.Error(codes.ResourceExhausted, "the server's data directory is full; nothing was committed")
	case errors.Is(err, store.ErrBadStream):
		// The IPC stream itself was malformed (corrupt message, schema
		// change mid-stream): the client's to fix. Transport failures kept
		// their own status above.
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &corrupt):
		return status.Error(codes.DataLoss, fmt.Sprintf("corrupt file in the store (%s); run the verify action", corrupt.Path))
	}
	return status.Error(codes.Internal, "internal error (see server log)")
}
