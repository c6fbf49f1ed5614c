// Package s3fs is an fsys.FS over a bucket and key prefix of Amazon S3 or
// an S3-compatible service (versitygw, MinIO, …), using the AWS SDK for
// Go v2 and its standard credential chain. It passes fsystest.Run against
// a real server (internal/s3test starts versitygw).
//
// # How the contracts map to requests
//
//	CreateExclusive   PutObject, If-None-Match: *            412 → fsys.ErrExist
//	Create/Commit     < one part: PutObject, If-None-Match: *;
//	                  else CreateMultipartUpload, UploadPart (one part
//	                  uploading while the next fills: ≤ 2 parts in memory),
//	                  CompleteMultipartUpload, If-None-Match: *  412 → ErrExist
//	Abort             AbortMultipartUpload
//	ReadFile          GetObject; the Token is the ETag
//	Replace           PutObject, If-Match: <ETag> (empty Token:
//	                  If-None-Match: *)                      412/404 → ErrPrecondition
//	Open              GetObject of the last ReadAhead bytes (size and ETag
//	                  from Content-Range); then ranged GETs with If-Match,
//	                  through a cache of 4 read-ahead windows
//	Stat              HeadObject; else ListObjectsV2 of "name/" (1 key): a directory
//	List              ListObjectsV2, delimiter "/", paginated: common
//	                  prefixes are directories, Mkdir markers hidden;
//	                  ListMultipartUploads: uploads as hidden temps
//	Mkdir             HEAD + 1-key listing (ErrExist if anything is there),
//	                  then a zero-byte "name/" marker, If-None-Match: *
//	Delete            DeleteObjects of name and "name/"; the hidden temp of an
//	                  upload: AbortMultipartUpload
//	DeleteAll         ListObjectsV2 without delimiter + DeleteObjects by
//	                  1000; uploads under the prefix aborted
//
// Every name is checked with fsys.ValidName before any request. Errors
// name the operation and the relative name and say what the service
// answered (code, HTTP status, request id), never the endpoint, the bucket
// or the prefix.
//
// # Retries
//
// Reads, lists and deletes are retried by the SDK (throttling, 5xx,
// dropped connections); a GET whose body breaks off is sent again. Conditional writes are retried here: after an
// attempt whose outcome is unknown, a retry that finds the condition
// failed checks the object's write id (x-amz-meta-quiver-write-id, random
// per call) to tell its own landed attempt from another writer's, so that
// a lost answer never turns a won race into ErrExist (which would, for
// the manifest lock, leave a lock nobody owns).
//
// # What the service must guarantee
//
// Strong read-after-write consistency for PUT, DELETE and LIST, and
// conditional writes: If-None-Match: * and If-Match on PutObject, and
// If-None-Match: * on CompleteMultipartUpload. Probe tries each; a service
// without conditional PutObject cannot hold Quiver's lock or log and is
// refused by `quiver serve`; one without conditional completion is used
// with Config.NoConditionalComplete (HEAD, then complete), which is safe
// for Quiver's store only because every data file name is claimed
// exclusively before it is written.
//
// # Caveats
//
//   - Directories do not exist on S3: a directory is a common prefix, or
//     a Mkdir marker. An empty directory lists as ErrNotExist unless it
//     has a marker; Stat of a directory has a ModTime only from its marker.
//   - A File reads what was there at Open: reads of an object replaced or
//     deleted since (beyond the tail Open fetched) fail rather than mix
//     versions; a local file would keep its old content.
//   - An in-progress write is not an object. List shows it as a hidden temp
//     dated by its newest part; a killed writer's upload stays (and is
//     billed) until sweep aborts it or a bucket lifecycle rule
//     (AbortIncompleteMultipartUpload) does.
//   - ModTime is the service's Last-Modified, which for an object written
//     by multipart upload may be the time the upload started.
package s3fs
