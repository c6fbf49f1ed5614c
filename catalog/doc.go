// Package catalog translates between the Flight wire vocabulary and the
// store: profile keys ⇄ PATH/CMD descriptors ⇄ tickets, listing profiles
// under a key prefix, and planning a read into a FlightInfo.
//
// # Descriptors and tickets
//
// A PATH descriptor's path components are the profile keys. A CMD
// descriptor is a JSON object (DESIGN.md §3.1) with "path" or "keys" plus
// put options (mode, partition_by, schema_version, metadata, request_id,
// format) or read options (version, partition, columns). A ticket is the
// read subset of that JSON, or a bare UTF-8 path; a ticket that begins with
// "{" must be JSON.
//
// # Wire types
//
// catalog declares every JSON body and result of the wire contract
// (DESIGN.md §3.1, docs/protocol.md) and its defaults: what a client sends
// (ReadCommand, PutCommand, PathBody, VerifyBody, RemoveOldVersionsBody,
// SweepBody) and what the server answers (PutResult, LineageRecord,
// CompactResult, ListVersionsResult, VerifyResult, RemoveOldVersionsResult,
// SweepResult, BreakLockResult). The server builds results from the
// store's with the …From functions, so the store's types are not the wire's.
//
// # Compatibility
//
// Requests are parsed strictly: a field the server does not know is
// InvalidArgument, so a typo never widens a read or an admin action.
// Results are the other way round: the server only ever adds fields to a
// result (PutResult's "seq" and "prev" are the next), never removes,
// renames or retypes one, and clients decode results leniently
// (encoding/json's default ignores unknown fields). A newer server thus
// works with an older client.
//
// # Planning
//
// Plan resolves a read to one snapshot of the store (one version, the exact
// committed files after partition pruning) and splits the files into
// endpoints of about EndpointBytes each. Every endpoint ticket pins the
// version and its files, so parallel endpoints see one snapshot even while
// new versions are written. A CSV version's endpoint tickets also carry the
// plan's column types ("csv_types"), which CSV reads otherwise infer from
// the version's current files, so that appends after the plan do not
// change the schema its endpoints stream.
//
// # Caveats
//
// catalog chooses no gRPC codes: its errors wrap ErrInvalid (a malformed
// request) or the store's sentinel errors, and flightserver maps them.
package catalog
