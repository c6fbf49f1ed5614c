package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
)

// putFlags configure `quiver put`.
type putFlags struct {
	conn          connFlags
	mode          string
	partitionBy   []string
	schemaVersion string
	schemaPolicy  string
	meta          []string
	requestID     string
	format        string
	progress      progressMode
	json          bool
	retries       int
	batchBytes    string
}

func newPut(stdout, stderr io.Writer) *cobra.Command {
	p := putFlags{progress: "auto"}
	cmd := &cobra.Command{
		Use:   "put PROFILE FILE...",
		Short: "Load Parquet, CSV, Arrow IPC/Feather or NDJSON files into a profile",
		Long: `Load files into a profile as one put: all FILEs go in one DoPut stream and
commit together (one append, or one new version with --mode write), or not at
all. They must have the same columns. Files are streamed, never loaded whole.

The format comes from the extension (.parquet, .csv, .arrow/.feather/.ipc,
.ndjson/.jsonl) or --format. Appended to an existing profile, CSV and NDJSON
are read as the profile's column types: 1 is 1.0 in a float64 column, an
empty field (or JSON null, or an absent NDJSON key) is null, a quoted
empty field ("") the empty string in a string or binary column (null in
others); dates are
2006-01-02, timestamps 2006-01-02 15:04:05.999999999 with a UTC offset
(+01:00, Z) where the type has a time zone, binary base64, lists JSON arrays
(as quiver get writes them); the CSV header must name every column of the
profile. A value that does not fit its type (a fraction in an integer
column, more decimal places than the scale, a null in a non-nullable
column, …) fails the put with its line, column and type: nothing is
rounded or converted. Otherwise (a new profile, --mode write) column types
are inferred from the first 1000 rows (int64, float64, bool, string); use
Parquet or Arrow to keep exact types; a column with a "" is a string
column. A later value of another type, or a
key (a CSV field) the first 1000 rows lack, fails the put with its line:
nothing is converted or dropped. Columns the profile lacks are inferred so
too, and are added under a higher --schema-version. CSV records end at LF,
CRLF or CR; quoted fields are kept byte for byte. Blank lines are skipped,
but after the header of a one-column file a blank line is a null row (as
quiver get writes one). One CSV record or NDJSON
line may hold at most 64 MiB.

Each invocation sends a fresh request id (or --request-id): a put whose
connection broke after the commit is retried (--retries) without writing
twice.`,
		Example: `  quiver put sales/orders orders-2024-*.parquet
  quiver put --mode write --partition-by region --schema-version 1.2.0 sales/orders orders.csv
  quiver put --meta run=r42 --meta source=crm sales/orders events.ndjson`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext(cmd)
			defer stop()
			return clientError(runPut(ctx, &p, args[0], args[1:], stdout, stderr), &p.conn)
		},
	}
	addConnFlags(cmd, &p.conn)
	f := cmd.Flags()
	f.StringVar(&p.mode, "mode", "append", "append (to the latest version) or write (a new version)")
	f.StringSliceVar(&p.partitionBy, "partition-by", nil, "hive partition columns, comma-separated (--mode write only)")
	f.StringVar(&p.schemaVersion, "schema-version", "", "schema version stamped into every file, e.g. 1.2.0 (raise it to append new nullable columns)")
	f.StringVar(&p.schemaPolicy, "schema-policy", "", "schema policy of a profile this put creates: additive or none")
	f.StringArrayVar(&p.meta, "meta", nil, "k=v metadata for the commit record (repeatable)")
	f.StringVar(&p.requestID, "request-id", "", "idempotency key (default: a new one per invocation)")
	f.StringVar(&p.format, "format", "", "input format for every FILE: parquet, csv, arrow or ndjson (default: by extension)")
	f.Var(&p.progress, "progress", "progress bar on stderr: auto (on a terminal), always or never")
	f.BoolVar(&p.json, "json", false, "print the commit as JSON")
	f.IntVar(&p.retries, "retries", 2, "times to retry a put the server could not be reached for (safe: same request id)")
	f.StringVar(&p.batchBytes, "max-batch-bytes", "4MiB", "slice input batches larger than this into several messages (keep it under the server's --max-recv-msg-size)")
	return cmd
}

// newRequestID is a random idempotency key for one invocation.
func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return "quiver-cli-" + hex.EncodeToString(b)
}

// putOptions are the put's options; the request id is generated here, so
// that retries reuse it and a retry message can name it.
func (p *putFlags) putOptions() (client.PutOptions, error) {
	o := client.PutOptions{SchemaVersion: p.schemaVersion, RequestID: p.requestID, SchemaPolicy: p.schemaPolicy}
	switch p.mode {
	case "append", "":
	case "write":
		o.Mode = catalog.ModeWrite
	default:
		return o, fmt.Errorf("--mode %q: want append or write", p.mode)
	}
	for _, c := range p.partitionBy {
		if c = strings.TrimSpace(c); c != "" {
			o.PartitionBy = append(o.PartitionBy, c)
		}
	}
	if len(o.PartitionBy) > 0 && o.Mode != catalog.ModeWrite {
		return o, errors.New("--partition-by needs --mode write (an append takes the partitioning of the version)")
	}
	for _, kv := range p.meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return o, fmt.Errorf("--meta %q: want key=value", kv)
		}
		if o.Metadata == nil {
			o.Metadata = map[string]any{}
		}
		o.Metadata[k] = v
	}
	if o.RequestID == "" {
		o.RequestID = newRequestID()
	}
	return o, nil
}

func runPut(ctx context.Context, p *putFlags, profile string, files []string, stdout, stderr io.Writer) error {
	opts, err := p.putOptions()
	if err != nil {
		return err
	}
	formats := make([]string, len(files))
	var total int64
	for i, f := range files {
		if formats[i], err = inputFormat(f, p.format); err != nil {
			return err
		}
		fi, err := os.Stat(f)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory", f)
		}
		total += fi.Size()
	}
	batchBytes, err := parseBytes(p.batchBytes)
	if err != nil {
		return fmt.Errorf("--max-batch-bytes: %w", err)
	}
	cl, err := p.conn.connect(ctx, client.WithMaxBatchBytes(batchBytes))
	if err != nil {
		return err
	}
	defer cl.Close()

	onRetry := func(err error, _ int, wait time.Duration) {
		fmt.Fprintf(stderr, "quiver: %v; retrying in %s (request id %s)\n", clientError(err, &p.conn), wait, opts.RequestID)
	}
	// CSV and NDJSON appended to a profile are read as its types.
	var target *profileTypes
	if opts.Mode != catalog.ModeWrite && (slices.Contains(formats, fmtCSV) || slices.Contains(formats, fmtNDJSON)) {
		if target, err = fetchProfileTypes(ctx, cl, profile, p.retries, onRetry); err != nil {
			return err
		}
	}

	// Each attempt reopens the files, with a fresh progress bar that the
	// reader's Release clears before any retry message.
	open := func(ctx context.Context) (array.RecordReader, error) {
		prog := newProgress(stderr, p.progress, total, true, "put "+profile)
		rdr, err := openPut(ctx, files, formats, prog, profile, target)
		if err != nil {
			prog.finish()
			return nil, err
		}
		return rdr, nil
	}
	opts.Retry = &client.RetryPolicy{Retries: p.retries, OnRetry: onRetry}
	rec, err := cl.PutFrom(ctx, profile, open, opts)
	if err != nil && ctx.Err() != nil {
		// Interrupted. A put whose client goes away before its commit
		// commits nothing, but once the server has all of it the commit
		// may be under way when the signal comes: say how to find out,
		// and how to re-run it without writing it twice.
		return fmt.Errorf("interrupted: if the server had received all the data the put may still have committed (see `quiver versions %s`); re-running it with --request-id %s never writes it twice", profile, opts.RequestID)
	}
	var tooLarge *client.MessageTooLargeError
	if errors.As(err, &tooLarge) && tooLarge.SchemaBytes == 0 {
		// (A schema over the limit is no matter of slicing: the error
		// says what helps.)
		return &hintError{err: err, hint: fmt.Sprintf("--max-batch-bytes, now %s, sets the size quiver put slices batches at", p.batchBytes)}
	}
	if err != nil {
		return err
	}
	if p.json {
		b, _ := json.Marshal(rec)
		_, err = fmt.Fprintln(stdout, string(b))
		return err
	}
	return printCommit(stdout, "committed", rec)
}

// fetchProfileTypes is the schema CSV and NDJSON appended to profile are
// read as (red team round 13, e05): its latest version's (GetSchema), or
// nil when the put creates the profile or the latest version has no
// columns (pyrosome's empty data: the append is then a write). A server
// that cannot be reached is asked again as a put would be (retries); an
// identity that may not read the profile gets nil, and the put the
// server's verdict. A profile of CSV files has the types the server infers
// when it reads them, and casts an append to: they are read as those too.
func fetchProfileTypes(ctx context.Context, cl *client.Client, profile string, retries int,
	onRetry func(error, int, time.Duration)) (*profileTypes, error) {
	for n := 1; ; n++ {
		pt, err := profileTypesOnce(ctx, cl, profile)
		if err == nil || status.Code(err) != codes.Unavailable || n > retries || ctx.Err() != nil {
			return pt, err
		}
		wait := time.Duration(n) * time.Second
		onRetry(err, n, wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func profileTypesOnce(ctx context.Context, cl *client.Client, profile string) (*profileTypes, error) {
	sc, err := cl.Schema(ctx, client.ReadRequest{Path: profile})
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound, codes.PermissionDenied, codes.InvalidArgument:
		return nil, nil // the put creates the profile, or is refused as it would be
	default:
		return nil, err
	}
	if sc.NumFields() == 0 {
		return nil, nil
	}
	return &profileTypes{name: profile, schema: sc}, nil
}

// openPut opens every file and checks they share the first one's columns;
// the reader streams them one after another. Nothing is sent when a file
// cannot be opened or does not match. CSV and NDJSON files are read as
// target's types (nil: inferred).
func openPut(ctx context.Context, files, formats []string, prog *progress, profile string, target *profileTypes) (*putReader, error) {
	mem := memory.DefaultAllocator
	r := &putReader{prog: prog, profile: profile}
	r.refs.Store(1)
	for i, f := range files {
		in, err := openInputAs(ctx, f, formats[i], mem, prog, target)
		if err != nil {
			r.close()
			return nil, err
		}
		r.inputs = append(r.inputs, in)
		if i > 0 {
			if err := sameColumns(r.inputs[0].rdr.Schema(), in.rdr.Schema()); err != nil {
				r.close()
				return nil, fmt.Errorf("%s does not match %s (one put needs the same columns): %w", f, files[0], err)
			}
		}
	}
	if err := r.prime(); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// putReader streams the inputs of one put attempt in order, under the
// first input's schema (later files may differ in nullability or metadata
// only; the client rebinds their batches). Releasing it closes the files
// and clears the progress bar.
type putReader struct {
	refs    atomic.Int64
	inputs  []*input
	i       int
	cur     arrow.RecordBatch // owned by its input's reader
	primed  bool              // cur, read by prime, is not yet returned by Next
	err     error
	rows    int64
	prog    *progress
	profile string
}

func (r *putReader) Schema() *arrow.Schema { return r.inputs[0].rdr.Schema() }

// prime reads the first batch ahead, before the put contacts the server:
// an input that fails in its first batch (a bad CSV or NDJSON row within
// its first batchRows rows) then fails the put without the server ever
// seeing it, so that not even the put's temporary directories appear.
func (r *putReader) prime() error {
	if !r.Next() && r.err != nil {
		return r.err
	}
	r.primed = true
	return nil
}

func (r *putReader) Next() bool {
	if r.primed {
		r.primed = false
		return r.cur != nil
	}
	if r.cur != nil {
		// The client asks for the next batch once the last one is sent.
		r.rows += r.cur.NumRows()
		r.prog.describe(fmt.Sprintf("put %s: %s rows", r.profile, groupDigits(r.rows)))
		r.cur = nil
	}
	for r.err == nil && r.i < len(r.inputs) {
		in := r.inputs[r.i]
		if in.rdr.Next() {
			r.cur = in.rdr.RecordBatch()
			return true
		}
		if err := in.rdr.Err(); err != nil {
			r.err = fmt.Errorf("%s: %w", in.path, err)
			return false
		}
		r.i++
	}
	return false
}

func (r *putReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *putReader) Record() arrow.RecordBatch      { return r.cur } //nolint:staticcheck // interface
func (r *putReader) Err() error                     { return r.err }
func (r *putReader) Retain()                        { r.refs.Add(1) }

func (r *putReader) Release() {
	if r.refs.Add(-1) == 0 {
		r.close()
		r.prog.finish()
	}
}

func (r *putReader) close() {
	for _, in := range r.inputs {
		_ = in.Close()
	}
	r.inputs = nil
}

// printCommit prints a commit record for people.
func printCommit(w io.Writer, verb string, rec *catalog.PutResult) error {
	files := "files"
	if len(rec.Files) == 1 {
		files = "file"
	}
	mode := rec.Mode
	if mode == "" {
		mode = "append"
	}
	fmt.Fprintf(w, "%s %s %s index %d (%s): %s rows, %d %s", verb, rec.Path, rec.Version, rec.Index, mode,
		groupDigits(rec.Rows), len(rec.Files), files)
	if rec.SchemaVersion != "" {
		fmt.Fprintf(w, ", schema version %s", rec.SchemaVersion)
	}
	fmt.Fprintln(w)
	t := newTextTable("FILE", "ROWS", "BYTES", "SHA256")
	t.rightAlign(1, 2)
	for _, f := range rec.Files {
		sum := f.SHA256
		if len(sum) > 16 {
			sum = sum[:16] + "…"
		}
		t.row(f.Path, groupDigits(f.Rows), humanBytes(f.Bytes), sum)
	}
	return t.write(w, "  ")
}
