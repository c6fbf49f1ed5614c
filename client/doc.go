// Package client is the Go client of a Quiver server: puts, reads (one
// stream, or planned and fetched in parallel from one snapshot), listings
// and the admin actions, over Arrow Flight.
//
// # Basics
//
// Connect takes "host:port", "grpc://host:port" or "grpc+tls://host:port"
// and options for a bearer token (WithToken) or a basic-auth login
// (WithBasicAuth), TLS (WithTLS, WithCAFile, WithClientCertFiles, …) and
// gRPC itself (WithDialOptions). The connection is made lazily: a server
// that cannot be reached shows up as codes.Unavailable on the first call.
//
// Requests and results are catalog's wire types (catalog.PutResult,
// catalog.VerifyResult, …), decoded leniently: fields a newer server adds
// are ignored.
//
// # Errors
//
// A call the server refused returns the server's gRPC status error itself,
// unwrapped: status.Code(err) is the code of docs/protocol.md
// (codes.NotFound for a missing profile, codes.InvalidArgument for a bad
// request, …) and status.Convert(err).Message() the server's message.
// Failures on the client's side wrap the sentinels of errors.go, and a
// put whose reader failed returns a *ReaderError.
//
// # Retries
//
// Every put carries a request id (generated when PutOptions.RequestID is
// empty). A put that fails with codes.Unavailable — the server could not be
// reached, was restarting, or its lock was busy — is retried with the same
// id (RetryPolicy), so a put whose answer was lost is not written twice:
// the server answers the first put's result. Put retries only while its
// reader is untouched; PutFrom reopens its source for every attempt.
//
// # Caveats
//
// Readers returned by Read, ReadEndpoint and ReadParallel hold a stream
// open until they are released; release them. Batches are valid until the
// next call to Next unless retained. Tokens from WithBasicAuth expire with
// the server's session TTL; connect again to log in anew.
package client
