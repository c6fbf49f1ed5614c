package catalog

import (
	"encoding/json"
	"time"

	"github.com/quiverdb/quiver/store/filter"
)

// Defaults of the wire contract (DESIGN.md §3.1), declared here once. The
// server uses them when a body leaves the field out; offline tools use them
// so that they act as the server would.
const (
	// DefaultGrace is how long remove-old-versions leaves a superseded
	// version in place for readers holding tickets to it, when the body
	// has no "grace_s" (the server's --grace may override it).
	DefaultGrace = time.Hour
	// DefaultSweepAge is the age after which sweep removes temps,
	// uncommitted files and abandoned versions, when the body has no
	// "older_than_s". It is also the age at which verify calls them stale.
	DefaultSweepAge = time.Hour
	// DefaultKeep is how many newest versions remove-old-versions keeps
	// when the body has no "keep".
	DefaultKeep = 1
)

// Put modes ("mode" of a CMD descriptor and of a commit record).
const (
	// ModeAppend adds files to the latest version (the default).
	ModeAppend = "append"
	// ModeWrite creates a new version.
	ModeWrite = "write"
)

// Data file formats ("format" of a CMD descriptor, a commit record and a
// version summary).
const (
	// FormatParquet is the default: Parquet files.
	FormatParquet = "parquet"
	// FormatCSV stores CSV files (pyrosome's other format).
	FormatCSV = "csv"
)

// Kinds of problem the verify action reports (Problem.Kind). Clients match
// on these strings.
const (
	// ProblemMutated: a committed file (or commit record) whose bytes no
	// longer match what was committed.
	ProblemMutated = "mutated"
	// ProblemMissing: a file a commit record lists is gone.
	ProblemMissing = "missing"
	// ProblemOrphan: a file no commit record lists (an interrupted put;
	// invisible to readers), or a version directory abandoned before its
	// first commit.
	ProblemOrphan = "orphan"
	// ProblemUnrecorded: a numbered data file with no commit record
	// (pyrosome's appends); readers see it, but it is unaudited.
	ProblemUnrecorded = "unrecorded"
	// ProblemStaleTemp: a temp file older than DefaultSweepAge.
	ProblemStaleTemp = "stale_temp"
	// ProblemStaleLock: a manifest lock whose owner is provably gone or
	// which is older than the lock stale limit.
	ProblemStaleLock = "stale_lock"
	// ProblemChain: a profile's commit log is not an intact hash chain
	// (a record deleted, reordered or rewritten).
	ProblemChain = "chain_broken"
	// ProblemSignature: a record whose signature does not verify with the
	// public key given to verify.
	ProblemSignature = "bad_signature"
	// ProblemLink: a symbolic link inside the data directory (never
	// followed).
	ProblemLink = "link"
	// ProblemUnknown: an entry the layout does not define (never deleted).
	ProblemUnknown = "unknown"
)

// Requests a client sends. The server parses them strictly (ParseCommand,
// ParseTicket, ParseAction reject unknown fields); these are the types a
// client marshals, and each of their fields is one the server takes.

// ReadCommand is the JSON of a read's CMD descriptor (GetFlightInfo,
// GetSchema) and of a DoGet ticket a client writes by hand.
type ReadCommand struct {
	// Path is the profile, "sales/orders".
	Path string `json:"path"`
	// Version is "v3", "3" or "latest"; empty is the latest.
	Version string `json:"version,omitempty"`
	// Partition keeps the hive partitions whose column has one of the
	// values (HiveNull selects null).
	Partition map[string][]string `json:"partition,omitempty"`
	// Columns projects the read, in this order; empty is every column.
	Columns []string `json:"columns,omitempty"`
	// Filter keeps the rows for which it is true (nil: every row); it is
	// sent in the JSON form.
	Filter *filter.Expr `json:"filter,omitempty"`
	// Limit, when not nil, ends the read after this many rows.
	Limit *int64 `json:"limit,omitempty"`
}

// PutCommand is the JSON of a DoPut's CMD descriptor.
type PutCommand struct {
	// Path is the profile, "sales/orders".
	Path string `json:"path"`
	// Mode is ModeAppend (empty) or ModeWrite.
	Mode string `json:"mode,omitempty"`
	// PartitionBy names hive partition columns (ModeWrite only).
	PartitionBy []string `json:"partition_by,omitempty"`
	// SchemaVersion is stamped into every data file of the put.
	SchemaVersion string `json:"schema_version,omitempty"`
	// Metadata is a JSON object copied into the commit record.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// RequestID is the idempotency key: a put with the id of an earlier put
	// to the same profile answers that put's result and writes nothing.
	RequestID string `json:"request_id,omitempty"`
	// Format is FormatParquet (empty) or FormatCSV.
	Format string `json:"format,omitempty"`
	// SchemaPolicy ("additive" or "none") is the profile's schema policy,
	// set by the put that creates the profile; a put to an existing
	// profile may only name the policy it has.
	SchemaPolicy string `json:"schema_policy,omitempty"`
}

// PathBody is the body of the actions that take only a profile:
// list-versions, lineage, break-lock and compact.
type PathBody struct {
	// Path is the profile, "sales/orders".
	Path string `json:"path"`
}

// VerifyBody is the body of verify: one profile, the profiles under a
// prefix, or (both empty) the whole data dir.
type VerifyBody struct {
	Path   string `json:"path,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	// Sample re-hashes this fraction of the files, 0 < Sample <= 1; 0 is
	// every file.
	Sample float64 `json:"sample,omitempty"`
	// Seed picks the sample: the same seed checks the same files.
	Seed int64 `json:"seed,omitempty"`
	// PublicKey (PEM, or 32 bytes in hex or base64) requires every commit
	// record to carry a valid ed25519 signature by its private key.
	PublicKey string `json:"public_key,omitempty"`
}

// RemoveOldVersionsBody is the body of remove-old-versions. Keep is always
// sent: 0 is refused (InvalidArgument) rather than silently taken as the
// default.
type RemoveOldVersionsBody struct {
	Path string `json:"path"`
	Keep int    `json:"keep"`
	// GraceS is the grace period in seconds; nil is the server's
	// (DefaultGrace unless configured), 0 removes at once.
	GraceS *float64 `json:"grace_s,omitempty"`
}

// SweepBody is the body of sweep.
type SweepBody struct {
	// OlderThanS is the age threshold in seconds; nil is the server's
	// (DefaultSweepAge).
	OlderThanS *float64 `json:"older_than_s,omitempty"`
}

// Results the server answers. Clients decode them leniently: see
// "Compatibility" in the package doc.

// FileRecord is one data file of a commit. Path is relative to the profile
// directory ("v1/region=eu/0.parquet").
//
// Offset and FileRows are set for a file that small appends of one commit
// cycle share: the record's Rows start at row Offset of the file's
// FileRows (store.FileRecord).
type FileRecord struct {
	Path      string            `json:"path"`
	Rows      int64             `json:"rows"`
	Bytes     int64             `json:"bytes"`
	SHA256    string            `json:"sha256"`
	Partition map[string]string `json:"partition,omitempty"`
	Offset    int64             `json:"offset,omitempty"`
	FileRows  int64             `json:"file_rows,omitempty"`
}

// PutResult is the app_metadata of DoPut's one PutResult: the commit record
// of the put (or, for a put replayed by its request id, of the earlier put).
// Lineage answers the same object per commit and compact for the version it
// wrote.
type PutResult struct {
	// Seq is the record's number in the profile's commit log (1, 2, 3…
	// across versions), and Prev the hex SHA-256 of the previous record's
	// line (docs/architecture.md). Records of data directories older than
	// the commit log have neither. The fields are in the order of the
	// stored record, so a result re-encoded by a client is byte-identical
	// to the line in the log.
	Seq           int64           `json:"seq,omitempty"`
	Prev          string          `json:"prev,omitempty"`
	Path          string          `json:"path"`
	Keys          []string        `json:"keys"`
	Version       string          `json:"version"`
	Index         int             `json:"index"`
	Mode          string          `json:"mode"`
	Format        string          `json:"format"`
	Rows          int64           `json:"rows"`
	SchemaVersion string          `json:"schema_version,omitempty"`
	Files         []FileRecord    `json:"files"`
	Committed     time.Time       `json:"committed"`
	Writer        string          `json:"writer"`
	RequestID     string          `json:"request_id,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	// VersionInfo (writes) is the SHA-256 of the version's .version.json;
	// Adopted marks a record taken into the log from an older data
	// directory.
	VersionInfo string `json:"version_info,omitempty"`
	Adopted     bool   `json:"adopted,omitempty"`
	// Schema (appends) is the schema of the put's files, base64 IPC, when
	// it is not the version's schema at the commit: the append added
	// nullable columns (schema evolution).
	Schema string `json:"schema,omitempty"`
	// Signer and Sig are the ed25519 signature of the record, when the
	// server signs (quiver serve --signing-key).
	Signer string `json:"signer,omitempty"`
	Sig    string `json:"sig,omitempty"`
}

// LineageRecord is one result of the lineage action: a commit record, the
// same object as a PutResult.
type LineageRecord = PutResult

// CompactResult is the result of the compact action: the commit record of
// the new version, the same object as a PutResult.
type CompactResult = PutResult

// VersionSummary describes one version of a profile.
type VersionSummary struct {
	Version       string    `json:"version"`
	Files         int       `json:"files"`
	Rows          int64     `json:"rows"`
	Bytes         int64     `json:"bytes"`
	Created       time.Time `json:"created,omitzero"`
	Format        string    `json:"format"`
	SchemaVersion string    `json:"schema_version,omitempty"`
	PartitionBy   []string  `json:"partition_by,omitempty"`
	Commits       int       `json:"commits"`
	// LastCommit is the time of the version's newest commit record.
	LastCommit time.Time `json:"last_commit,omitzero"`
	// SchemaVersions are the schema versions the version's files were
	// written under, each with its files and rows, in the order first
	// committed. SchemaVersion is the highest.
	SchemaVersions []SchemaVersionCount `json:"schema_versions,omitempty"`
}

// SchemaVersionCount is how many files and rows of a version were written
// under one schema version.
type SchemaVersionCount struct {
	SchemaVersion string `json:"schema_version"`
	Files         int    `json:"files"`
	Rows          int64  `json:"rows"`
}

// ListVersionsResult is the result of list-versions: every version, oldest
// first, and the latest one ("v1") the manifest names.
type ListVersionsResult struct {
	Path     string           `json:"path"`
	Latest   string           `json:"latest"`
	Versions []VersionSummary `json:"versions"`
	// SchemaPolicy is the profile's schema policy, when it has one
	// ("additive").
	SchemaPolicy string `json:"schema_policy,omitempty"`
}

// SchemaPolicyResult is the result of set-schema-policy.
type SchemaPolicyResult struct {
	Path         string    `json:"path"`
	SchemaPolicy string    `json:"schema_policy"`
	Set          time.Time `json:"set,omitzero"`
	Writer       string    `json:"writer,omitempty"`
}

// Problem is one finding of verify. Path is relative to the data
// directory ("sales/orders/v0/1.parquet"), never a server path.
type Problem struct {
	// Kind is one of the Problem* constants.
	Kind   string `json:"kind"`
	Path   string `json:"path"`
	Detail string `json:"detail"`
}

// VerifyResult is the result of verify.
type VerifyResult struct {
	OK bool `json:"ok"`
	// CheckedFiles counts the committed files whose content was re-hashed.
	CheckedFiles int       `json:"checked_files"`
	Problems     []Problem `json:"problems"`
	// Heads are the last records of the verified profiles' commit logs:
	// publish them elsewhere to detect a truncated history later.
	Heads []ChainHead `json:"heads,omitempty"`
	// Seed is the seed of a sampled verify (given, or drawn when none
	// was): the same seed checks the same files again.
	Seed int64 `json:"seed,omitempty"`
}

// ChainHead is the last record of a profile's commit log.
type ChainHead struct {
	Path string `json:"path"`
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// KeptVersion is an old version remove-old-versions left in place, and why.
type KeptVersion struct {
	Version string `json:"version"`
	Reason  string `json:"reason"`
}

// RemoveOldVersionsResult is the result of remove-old-versions.
type RemoveOldVersionsResult struct {
	// Removed are the removed versions ("v0"), oldest first.
	Removed []string `json:"removed"`
	// Kept are old versions beyond keep that were not removed.
	Kept []KeptVersion `json:"kept,omitempty"`
}

// SweepResult is the result of sweep.
type SweepResult struct {
	// Removed are the removed files and directories, relative to the data
	// directory.
	Removed []string `json:"removed"`
	// Skipped is what sweep found and would not remove (entries it cannot
	// classify, links, profiles whose commit log is not an intact chain),
	// each with the reason. Like Removed and Settled it is always there,
	// empty or not (red team round 37's s21).
	Skipped []Problem `json:"skipped"`
	// Settled are the profiles whose missing manifest sweep wrote from
	// their commit log.
	Settled []string `json:"settled"`
}

// BreakLockResult is the result of break-lock.
type BreakLockResult struct {
	Broken bool   `json:"broken"`
	Reason string `json:"reason"`
}
