package codec

import "errors"

// Sentinel errors. Callers test for them with errors.Is; the store aliases
// them (store.ErrSchemaMismatch is ErrSchemaMismatch) and the Flight server
// maps them to status codes. Their messages reach clients, so they carry no
// package prefix and the errors built on them name the columns concerned,
// never a server path.
var (
	// ErrSchemaMismatch: the columns or types of incoming data do not fit
	// the schema they must join (missing, unexpected or duplicate columns,
	// a type that is not a lossless widening).
	ErrSchemaMismatch = errors.New("schema mismatch")
	// ErrInvalid: data or options that cannot be stored faithfully: a
	// malformed batch, nulls in a non-nullable column, a partition value
	// that cannot name a directory, a type the format cannot hold, an
	// unknown column or format.
	ErrInvalid = errors.New("invalid argument")
)
