// Package quivertest is what the test suites share to run Quiver: build
// the quiver binary, start `quiver serve` processes over a local
// directory or an S3 bucket (versitygw, internal/s3test) and stop or kill
// them, serve a Flight server in-process on a loopback port, a test PKI
// and auth-file helpers, and the few raw Flight calls tests make below the
// client package (one DoPut, one DoAction, descriptors): for tests of the
// wire protocol and for flightserver's own tests. Ordinary puts, reads,
// listing and actions go through the client package.
//
// It imports neither flightserver nor client, so that their own tests
// can use it.
package quivertest
