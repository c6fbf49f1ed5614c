package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/filter"
)

// Latest is the Version of a request that reads the newest version.
const Latest = -1

// HiveNull is the partition value that selects null partition values
// (pyarrow's hive default partition name). A JSON null in a partition
// filter means the same.
const HiveNull = "__HIVE_DEFAULT_PARTITION__"

// maxRequestBytes bounds the JSON of a descriptor, ticket or action body, so
// that a hostile client cannot make the server parse megabytes of JSON.
const maxRequestBytes = 1 << 20

// Request is a parsed CMD/PATH descriptor or ticket: the profile and the
// options of a read or a put. Fields that do not apply to an RPC are zero.
type Request struct {
	// Keys name the profile (validated by store.ParseKeys).
	Keys []string

	// Read options.

	// Version is the version to read, or Latest.
	Version int
	// Partition keeps only files whose partition column values are one of
	// the listed hive values.
	Partition map[string][]string
	// Columns projects the read, in this order; nil means all columns.
	Columns []string
	// Files pins exact committed files (paths relative to the profile
	// directory), as tickets from Plan do; nil means every file.
	Files []string
	// CSVTypes, with Files of a CSV version, gives every column of the
	// version its type by name ("int64", "float64", "bool", "string"), as
	// tickets from Plan do: the read streams the plan's types even after
	// appends changed what the version's files give (store.SnapshotOptions).
	// Nil: the version's types.
	CSVTypes map[string]string
	// Filter keeps only the rows for which it is true (nil: every row).
	Filter *filter.Expr
	// Limit, when not nil, ends the read after this many rows.
	Limit *int64
	// Multi, when not nil, reads several profiles as one (Keys is nil).
	Multi *MultiRead

	// Put options (CMD descriptors only).

	// Mode is store.ModeAppend (default) or store.ModeWrite.
	Mode store.Mode
	// PartitionBy names hive partition columns of a write.
	PartitionBy []string
	// SchemaVersion is stamped into every data file of the put.
	SchemaVersion string
	// Metadata is a JSON object copied into the commit record.
	Metadata json.RawMessage
	// RequestID is the client's idempotency key.
	RequestID string
	// Format is "parquet" (default) or "csv".
	Format string
	// SchemaPolicy is the profile's schema policy a creating put sets.
	SchemaPolicy string
}

// Path is the profile's slash-joined name.
func (r *Request) Path() string {
	if r.Multi != nil {
		return r.Multi.Describe()
	}
	return store.ProfilePath(r.Keys)
}

// ReadOptions converts the read fields for store.Read.
func (r *Request) ReadOptions() store.ReadOptions {
	o := store.ReadOptions{
		SnapshotOptions: store.SnapshotOptions{Version: r.Version, Partition: r.Partition, Files: r.Files, CSVTypes: r.CSVTypes, Filter: r.Filter},
		Columns:         r.Columns,
	}
	if r.Limit != nil {
		o.Limit = *r.Limit
	}
	return o
}

// CheckPut refuses read fields in a put's descriptor: a put cannot name a
// version (appends always go to the latest; mode "write" makes a new one),
// nor a partition filter, columns or files.
func (r *Request) CheckPut() error {
	var bad []string
	if r.Version != Latest {
		bad = append(bad, "version")
	}
	if r.Partition != nil {
		bad = append(bad, "partition")
	}
	if r.Columns != nil {
		bad = append(bad, "columns")
	}
	if r.Files != nil {
		bad = append(bad, "files")
	}
	if r.CSVTypes != nil {
		bad = append(bad, "csv_types")
	}
	if r.Filter != nil {
		bad = append(bad, "filter")
	}
	if r.Limit != nil {
		bad = append(bad, "limit")
	}
	if r.Multi != nil {
		bad = append(bad, "prefix, paths")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: a put's descriptor cannot set %s (appends always go to the latest version; use mode \"write\" for a new version, partition_by to partition it)", ErrInvalid, strings.Join(bad, ", "))
	}
	return nil
}

// PutOptions converts the put fields for store.Put.
func (r *Request) PutOptions() store.PutOptions {
	return store.PutOptions{
		Mode:          r.Mode,
		PartitionBy:   r.PartitionBy,
		SchemaVersion: r.SchemaVersion,
		Format:        r.Format,
		Metadata:      r.Metadata,
		RequestID:     r.RequestID,
		SchemaPolicy:  r.SchemaPolicy,
	}
}

// versionField accepts "v3", "3", 3, "latest" or null.
type versionField struct{ n int }

func (v *versionField) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		v.n = Latest
		return nil
	}
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "latest" {
			v.n = Latest
			return nil
		}
	} else {
		s = string(b)
	}
	n, err := store.ParseVersion(s)
	if err != nil {
		return fmt.Errorf("%w: version %s: want \"v<N>\", <N> or \"latest\"", filter.ErrInvalid, truncate(string(b)))
	}
	v.n = n
	return nil
}

// partitionValues accepts one value or a list of values; strings, numbers
// and booleans are hive text, null is HiveNull.
type partitionValues []string

func (p *partitionValues) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var raw []json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			return err
		}
		if len(raw) == 0 {
			return errors.New("empty list of partition values")
		}
		out := make([]string, 0, len(raw))
		for _, r := range raw {
			v, err := partitionScalar(r)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		*p = out
		return nil
	}
	v, err := partitionScalar(b)
	if err != nil {
		return err
	}
	*p = []string{v}
	return nil
}

func partitionScalar(b json.RawMessage) (string, error) {
	b = bytes.TrimSpace(b)
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	switch x := v.(type) {
	case nil:
		return HiveNull, nil
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	}
	return "", fmt.Errorf("partition value %s: want a string, number, boolean, null or a list of them", truncate(string(b)))
}

// readWire is the JSON of a ticket: the read fields only.
type readWire struct {
	Path      *string                    `json:"path,omitempty"`
	Keys      []string                   `json:"keys,omitempty"`
	Version   *versionField              `json:"version,omitempty"`
	Partition map[string]partitionValues `json:"partition,omitempty"`
	Columns   []string                   `json:"columns,omitempty"`
	Files     *[]string                  `json:"files,omitempty"`
	CSVTypes  *csvTypesField             `json:"csv_types,omitempty"`
	Filter    *filterField               `json:"filter,omitempty"`
	Limit     *limitField                `json:"limit,omitempty"`
	multiWire
}

// cmdWire is the JSON of a CMD descriptor: read and put fields.
type cmdWire struct {
	readWire
	Mode          string          `json:"mode,omitempty"`
	PartitionBy   []string        `json:"partition_by,omitempty"`
	SchemaVersion string          `json:"schema_version,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	RequestID     string          `json:"request_id,omitempty"`
	Format        string          `json:"format,omitempty"`
	SchemaPolicy  string          `json:"schema_policy,omitempty"`
}

// decodeStrict decodes exactly one JSON value into v, rejecting unknown
// fields (a typo such as "partiton" must not silently read everything) and
// trailing data.
func decodeStrict(b []byte, v any) error {
	if len(b) > maxRequestBytes {
		return fmt.Errorf("longer than %d bytes", maxRequestBytes)
	}
	if !utf8.Valid(b) {
		// encoding/json would turn each invalid byte into U+FFFD: keys,
		// ids and metadata would not be what the client sent.
		return errors.New("not valid UTF-8")
	}
	if err := checkFieldNames(b, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// checkFieldNames refuses what encoding/json would let through in the top
// level object: a field named in another case ("Path", which the decoder
// matches to "path") and a field given twice (the decoder keeps the last,
// so {"path":"a","PATH":"b"} would read b). Both are ambiguous requests.
func checkFieldNames(b []byte, v any) error {
	known := jsonFieldNames(reflect.TypeOf(v))
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil // not an object: Decode reports it
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := t.(string)
		if !known[name] {
			return fmt.Errorf("unknown field %q", truncate(name))
		}
		if seen[name] {
			return fmt.Errorf("field %q given twice", name)
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// jsonFieldNames lists the JSON names of a struct's fields, embedded
// structs included.
func jsonFieldNames(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	names := map[string]bool{}
	if t.Kind() != reflect.Struct {
		return names
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Tag.Get("json") == "" {
			for n := range jsonFieldNames(f.Type) {
				names[n] = true
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name] = true
	}
	return names
}

func (w *readWire) toRequest(what string) (*Request, error) {
	r := &Request{Version: Latest}
	switch {
	case w.Path != nil && w.Keys != nil:
		return nil, fmt.Errorf("%w: %s has both \"path\" and \"keys\"; give one", ErrInvalid, what)
	case w.Path != nil:
		keys, err := store.ParseKeys(*w.Path)
		if err != nil {
			return nil, fmt.Errorf("%s path: %w", what, err)
		}
		r.Keys = keys
	case w.Keys != nil:
		keys, err := store.ParseKeys(w.Keys...)
		if err != nil {
			return nil, fmt.Errorf("%s keys: %w", what, err)
		}
		r.Keys = keys
	case w.multiWire.set():
		// Several profiles: checked below.
	default:
		return nil, fmt.Errorf("%w: %s names no profile (want \"path\" or \"keys\")", ErrInvalid, what)
	}
	if w.Version != nil {
		r.Version = w.Version.n
	}
	if len(w.Partition) > 0 {
		r.Partition = make(map[string][]string, len(w.Partition))
		for col, vals := range w.Partition {
			if col == "" {
				return nil, fmt.Errorf("%w: %s has an empty partition column name", ErrInvalid, what)
			}
			r.Partition[col] = []string(vals)
		}
	}
	if w.Columns != nil {
		for _, c := range w.Columns {
			if c == "" {
				return nil, fmt.Errorf("%w: %s has an empty column name", ErrInvalid, what)
			}
		}
		r.Columns = append([]string{}, w.Columns...)
	}
	if w.Files != nil {
		seen := make(map[string]bool, len(*w.Files))
		for _, f := range *w.Files {
			if seen[f] {
				return nil, fmt.Errorf("%w: %s lists file %q twice", ErrInvalid, what, truncate(f))
			}
			seen[f] = true
		}
		r.Files = append([]string{}, (*w.Files)...)
	}
	if w.CSVTypes != nil {
		if w.Files == nil || w.multiWire.set() {
			return nil, fmt.Errorf("%w: %s: \"csv_types\" go with the \"files\" of one profile (a planned CSV endpoint)", ErrInvalid, what)
		}
		r.CSVTypes = maps.Clone(w.CSVTypes.m)
	}
	if w.Filter != nil {
		r.Filter = w.Filter.e
	}
	if w.Limit != nil {
		n := w.Limit.n
		r.Limit = &n
	}
	if w.multiWire.set() {
		if r.Keys != nil && w.Prefix == nil && w.Paths == nil {
			// (red team round 47: a ticket of "path" and "read" was told
			// about "prefix"/"paths", which it did not hold.)
			return nil, fmt.Errorf("%w: %s names one profile (\"path\"/\"keys\"): \"versions\", \"read\" and \"source_column\" go with \"prefix\" or \"paths\" only", ErrInvalid, what)
		}
		if r.Keys != nil {
			return nil, fmt.Errorf("%w: %s names a profile (\"path\"/\"keys\") and several (\"prefix\"/\"paths\"); give one", ErrInvalid, what)
		}
		if err := w.multiWire.toMulti(what, r, w.Version != nil); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// ParseTicket parses a DoGet ticket: JSON when it begins with "{" (after
// white space), otherwise a bare UTF-8 profile path such as "sales/orders",
// taken as sent (keys with white space at either end are refused).
func ParseTicket(b []byte) (*Request, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return nil, fmt.Errorf("%w: empty ticket", ErrInvalid)
	}
	if t[0] != '{' {
		// The bare path as sent: "sales/orders " is not "sales/orders".
		return parseBarePath(b, "ticket")
	}
	var w readWire
	if err := decodeStrict(t, &w); err != nil {
		if errors.Is(err, filter.ErrInvalid) {
			return nil, fmt.Errorf("%w: ticket: %w", ErrInvalid, err)
		}
		return nil, fmt.Errorf("%w: ticket is not valid JSON: %s", ErrInvalid, jsonError(err))
	}
	return w.toRequest("ticket")
}

func parseBarePath(b []byte, what string) (*Request, error) {
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: %s is neither JSON nor a UTF-8 path", ErrInvalid, what)
	}
	if len(b) > maxRequestBytes {
		return nil, fmt.Errorf("%w: %s longer than %d bytes", ErrInvalid, what, maxRequestBytes)
	}
	keys, err := store.ParseKeys(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return &Request{Keys: keys, Version: Latest}, nil
}

// ParseDescriptor parses a Flight descriptor. A PATH descriptor's
// components are the keys; a CMD descriptor is JSON (see package doc), or
// a bare path when it does not begin with "{".
func ParseDescriptor(d *flight.FlightDescriptor) (*Request, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: missing flight descriptor", ErrInvalid)
	}
	switch d.Type {
	case flight.DescriptorPATH:
		if len(d.Path) == 0 {
			return nil, fmt.Errorf("%w: PATH descriptor has no path", ErrInvalid)
		}
		keys, err := store.ParseKeys(d.Path...)
		if err != nil {
			return nil, fmt.Errorf("descriptor: %w", err)
		}
		return &Request{Keys: keys, Version: Latest, Mode: store.ModeAppend}, nil
	case flight.DescriptorCMD:
		return ParseCommand(d.Cmd)
	}
	return nil, fmt.Errorf("%w: descriptor type %v (want PATH or CMD)", ErrInvalid, d.Type)
}

// ParseCommand parses the bytes of a CMD descriptor.
func ParseCommand(b []byte) (*Request, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return nil, fmt.Errorf("%w: empty CMD descriptor", ErrInvalid)
	}
	if t[0] != '{' {
		r, err := parseBarePath(b, "descriptor")
		if err != nil {
			return nil, err
		}
		r.Mode = store.ModeAppend
		return r, nil
	}
	var w cmdWire
	if err := decodeStrict(t, &w); err != nil {
		if errors.Is(err, filter.ErrInvalid) {
			return nil, fmt.Errorf("%w: descriptor: %w", ErrInvalid, err)
		}
		return nil, fmt.Errorf("%w: CMD descriptor is not valid JSON: %s", ErrInvalid, jsonError(err))
	}
	r, err := w.toRequest("descriptor")
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(w.Mode) {
	case "", string(store.ModeAppend):
		r.Mode = store.ModeAppend
	case string(store.ModeWrite):
		r.Mode = store.ModeWrite
	default:
		return nil, fmt.Errorf("%w: mode %q (want \"append\" or \"write\")", ErrInvalid, truncate(w.Mode))
	}
	if len(w.PartitionBy) > 0 && r.Mode != store.ModeWrite {
		return nil, fmt.Errorf("%w: partition_by needs mode \"write\" (an append follows the version's partitioning)", ErrInvalid)
	}
	r.PartitionBy = w.PartitionBy
	r.SchemaVersion = w.SchemaVersion
	if len(w.Metadata) > 0 && !bytes.Equal(bytes.TrimSpace(w.Metadata), []byte("null")) {
		if m := bytes.TrimSpace(w.Metadata); m[0] != '{' {
			return nil, fmt.Errorf("%w: metadata must be a JSON object", ErrInvalid)
		}
		r.Metadata = append(json.RawMessage{}, w.Metadata...)
	}
	if len(w.RequestID) > 256 {
		return nil, fmt.Errorf("%w: request_id longer than 256 bytes", ErrInvalid)
	}
	r.RequestID = w.RequestID
	r.Format = w.Format
	switch w.SchemaPolicy {
	case "", store.PolicyAdditive, store.PolicyNone:
		r.SchemaPolicy = w.SchemaPolicy
	default:
		return nil, fmt.Errorf("%w: schema_policy %q (want %q or %q)", ErrInvalid, truncate(w.SchemaPolicy), store.PolicyAdditive, store.PolicyNone)
	}
	return r, nil
}

// PathDescriptor is the PATH descriptor of a profile.
func PathDescriptor(keys []string) *flight.FlightDescriptor {
	return &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: append([]string{}, keys...)}
}

// EncodeTicket renders the read fields of r as a JSON ticket that
// ParseTicket reads back to the same request. The version is written as a
// number; Latest is left out.
func EncodeTicket(r *Request) []byte {
	w := readWire{Columns: r.Columns}
	if r.Multi != nil {
		r.Multi.wire(&w.multiWire)
	} else {
		path := r.Path()
		w.Path = &path
	}
	if r.Version != Latest {
		w.Version = &versionField{n: r.Version}
	}
	if len(r.Partition) > 0 {
		w.Partition = make(map[string]partitionValues, len(r.Partition))
		for k, v := range r.Partition {
			w.Partition[k] = v
		}
	}
	if r.Files != nil {
		files := append([]string{}, r.Files...)
		w.Files = &files
	}
	if r.CSVTypes != nil {
		w.CSVTypes = &csvTypesField{m: r.CSVTypes}
	}
	if r.Filter != nil {
		w.Filter = &filterField{e: r.Filter}
	}
	if r.Limit != nil {
		w.Limit = &limitField{n: *r.Limit}
	}
	b, err := json.Marshal(w)
	if err != nil {
		panic(fmt.Sprintf("catalog: encode ticket: %v", err)) // strings and ints only; cannot fail
	}
	return b
}

// MarshalJSON writes a version as its number (Latest as "latest").
func (v versionField) MarshalJSON() ([]byte, error) {
	if v.n == Latest {
		return []byte(`"latest"`), nil
	}
	return []byte(strconv.Itoa(v.n)), nil
}

// jsonError shortens a decoder error for a client message.
// jsonError says what is wrong with a JSON body in the client's terms: a
// value of the wrong type names its field and the JSON type wanted, not
// the Go types it was to be decoded into.
func jsonError(err error) string {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		field := ute.Field
		if field == "" {
			return truncate(fmt.Sprintf("want %s, not %s", jsonKind(ute.Type), ute.Value))
		}
		return truncate(fmt.Sprintf("field %q must be %s, not %s", field, jsonKind(ute.Type), ute.Value))
	}
	return truncate(err.Error())
}

// jsonKind names the JSON value a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another value"
}

func truncate(s string) string {
	const max = 120
	if len(s) <= max {
		return strings.ToValidUTF8(s, "?")
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "?") + "…"
}
