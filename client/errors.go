package client

import (
	"errors"
	"fmt"
)

// ErrInvalidAddress is returned by Connect for an address that is not
// host:port, grpc://host:port or grpc+tls://host:port.
var ErrInvalidAddress = errors.New("client: invalid address")

// ErrEmptyAddress is the ErrInvalidAddress of an address with no host.
var ErrEmptyAddress = fmt.Errorf("%w: empty", ErrInvalidAddress)

// ErrInvalidOption is returned by Connect for options that contradict each
// other or name files that cannot be used.
var ErrInvalidOption = errors.New("client: invalid option")

// ErrUnexpectedResult marks a server answer this client cannot read: a
// result that is not the JSON it expects, or the wrong number of results.
var ErrUnexpectedResult = errors.New("client: unexpected result")

// ReaderError is a put that failed on the client's side: its reader (or
// PutFrom's opener) failed. The stream was cancelled, so nothing was
// committed, and the put is not retried. Its message is the reader's.
type ReaderError struct {
	Err error
}

// Error is the reader's message, unchanged.
func (e *ReaderError) Error() string { return e.Err.Error() }

// Unwrap returns the reader's error.
func (e *ReaderError) Unwrap() error { return e.Err }
