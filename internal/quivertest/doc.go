// Package quivertest is what the test suites share to run Quiver: build
// the quiver binary, start `quiver serve` processes over a local
// directory or an S3 bucket (versitygw, internal/s3test) and stop or kill
// them, serve a Flight server in-process on a loopback port, and the few
// raw Flight calls tests make below the client package (one DoPut, one
// DoAction, descriptors).
//
// It imports neither flightserver nor client, so that their own tests
// can use it.
package quivertest
