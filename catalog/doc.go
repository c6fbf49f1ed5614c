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
// # Planning
//
// Plan resolves a read to one snapshot of the store (one version, the exact
// committed files after partition pruning) and splits the files into
// endpoints of about EndpointBytes each. Every endpoint ticket pins the
// version and its files, so parallel endpoints see one snapshot even while
// new versions are written.
//
// # Caveats
//
// catalog chooses no gRPC codes: its errors wrap ErrInvalid (a malformed
// request) or the store's sentinel errors, and flightserver maps them.
package catalog
