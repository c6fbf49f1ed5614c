package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// VersionInfo is a version's .version.json: what it was written as. It is
// created once, before any data file of the version, and never rewritten.
// Versions written by pyrosome have none; their schema is the first file's.
type VersionInfo struct {
	Version       string    `json:"version"`
	Format        Format    `json:"format"`
	PartitionBy   []string  `json:"partition_by,omitempty"`
	SchemaVersion string    `json:"schema_version,omitempty"`
	Created       time.Time `json:"created"`
	Writer        string    `json:"writer,omitempty"`
	// Schema is the Arrow schema as an IPC schema message, base64, the same
	// encoding Parquet's ARROW:schema uses.
	Schema string `json:"schema"`
	// Columns is the schema in words, for people reading the file.
	Columns []ColumnInfo `json:"columns"`
}

// ColumnInfo names one column and its Arrow type.
type ColumnInfo struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// CommitRecord is the immutable .<i>.commit.json of one write or append:
// what was committed, by whom, with what hashes. A profile's lineage is its
// commit records in order. The DoPut result is the same object.
type CommitRecord struct {
	Path          string          `json:"path"`
	Keys          []string        `json:"keys"`
	Version       string          `json:"version"`
	Index         int             `json:"index"`
	Mode          Mode            `json:"mode"`
	Format        Format          `json:"format"`
	Rows          int64           `json:"rows"`
	SchemaVersion string          `json:"schema_version,omitempty"`
	Files         []FileRecord    `json:"files"`
	Committed     time.Time       `json:"committed"`
	Writer        string          `json:"writer"`
	RequestID     string          `json:"request_id,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	// Replayed is set (never stored) when Put returned the record of an
	// earlier put with the same request id instead of writing.
	Replayed bool `json:"-"`
}

// FileRecord is one data file of a commit. Path is relative to the profile
// directory ("v1/region=eu/0.parquet").
type FileRecord struct {
	Path      string            `json:"path"`
	Rows      int64             `json:"rows"`
	Bytes     int64             `json:"bytes"`
	SHA256    string            `json:"sha256"`
	Partition map[string]string `json:"partition,omitempty"`
}

func encodeSchema(sc *arrow.Schema) []byte {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(sc), ipc.WithAllocator(memory.DefaultAllocator))
	_ = w.Close() // writes the schema message into a bytes.Buffer; cannot fail
	return buf.Bytes()
}

func decodeSchema(b []byte) (*arrow.Schema, error) {
	r, err := ipc.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Release()
	return r.Schema(), nil
}

func newVersionInfo(version int, f Format, sc *arrow.Schema, partitionBy []string, schemaVersion string, created time.Time, writer string) VersionInfo {
	vi := VersionInfo{
		Version:       VersionName(version),
		Format:        f,
		PartitionBy:   partitionBy,
		SchemaVersion: schemaVersion,
		Created:       created.UTC(),
		Writer:        writer,
		Schema:        base64.StdEncoding.EncodeToString(encodeSchema(sc)),
	}
	for _, fl := range sc.Fields() {
		vi.Columns = append(vi.Columns, ColumnInfo{Name: fl.Name, Type: fl.Type.String()})
	}
	return vi
}

// ArrowSchema decodes the frozen schema.
func (vi *VersionInfo) ArrowSchema() (*arrow.Schema, error) {
	b, err := base64.StdEncoding.DecodeString(vi.Schema)
	if err != nil {
		return nil, err
	}
	return decodeSchema(b)
}

func parseVersionInfo(b []byte) (*VersionInfo, *arrow.Schema, error) {
	var vi VersionInfo
	if err := json.Unmarshal(b, &vi); err != nil {
		return nil, nil, err
	}
	if _, err := parseFormat(string(vi.Format)); err != nil {
		return nil, nil, err
	}
	sc, err := vi.ArrowSchema()
	if err != nil {
		return nil, nil, fmt.Errorf("schema: %w", err)
	}
	for _, c := range vi.PartitionBy {
		if len(sc.FieldIndices(c)) != 1 {
			return nil, nil, fmt.Errorf("partition column %q not in schema", c)
		}
	}
	return &vi, sc, nil
}

// ParseCommitRecord parses a .<i>.commit.json and checks the fields a reader
// relies on.
func ParseCommitRecord(b []byte) (*CommitRecord, error) {
	var c CommitRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	if _, ok := parseVersionDir(c.Version); !ok {
		return nil, fmt.Errorf("version %q is not v<N>", c.Version)
	}
	if c.Index < 0 {
		return nil, fmt.Errorf("negative index %d", c.Index)
	}
	var sum int64
	for _, f := range c.Files {
		if f.Path == "" || len(f.SHA256) != 64 || f.Rows < 0 {
			return nil, fmt.Errorf("bad file entry %q", f.Path)
		}
		sum += f.Rows
	}
	if sum != c.Rows {
		return nil, fmt.Errorf("rows %d do not add up to the files' %d", c.Rows, sum)
	}
	return &c, nil
}

// readVersionInfo reads a version's .version.json; (nil, nil, nil) when the
// version has none (written by pyrosome).
func (s *Store) readVersionInfo(p profile, version int) (*VersionInfo, *arrow.Schema, error) {
	name := p.join(VersionName(version), versionInfoName)
	b, err := s.fs.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", p, VersionName(version), err)
	}
	vi, sc, err := parseVersionInfo(b)
	if err != nil {
		return nil, nil, &CorruptionError{Path: name, Err: err}
	}
	return vi, sc, nil
}

// commitRecords reads every commit record of a version, in index order.
func (s *Store) commitRecords(p profile, version int, entries []fs.DirEntry) ([]*CommitRecord, error) {
	var idx []int
	for _, e := range entries {
		if i, ok := parseIndexed(commitRe, e.Name()); ok && !e.IsDir() {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	out := make([]*CommitRecord, 0, len(idx))
	for _, i := range idx {
		name := p.join(VersionName(version), commitName(i))
		b, err := s.fs.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", p, VersionName(version), err)
		}
		c, err := ParseCommitRecord(b)
		if err != nil {
			return nil, &CorruptionError{Path: name, Err: err}
		}
		out = append(out, c)
	}
	return out, nil
}
