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
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/store"
)

// putFlags configure `quiver put`.
type putFlags struct {
	conn          connFlags
	mode          string
	partitionBy   []string
	schemaVersion string
	meta          []string
	requestID     string
	format        string
	progress      progressMode
	json          bool
	retries       int
}

// putDescriptor is the CMD descriptor of a DoPut (DESIGN.md §3.1).
type putDescriptor struct {
	Path          string            `json:"path"`
	Mode          string            `json:"mode,omitempty"`
	PartitionBy   []string          `json:"partition_by,omitempty"`
	SchemaVersion string            `json:"schema_version,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	RequestID     string            `json:"request_id,omitempty"`
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
.ndjson/.jsonl) or --format. CSV and NDJSON column types are inferred from
the first 1000 rows (int64, float64, bool, string); use Parquet or Arrow to
keep exact types.

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
	f.StringVar(&p.schemaVersion, "schema-version", "", "schema version stamped into every file, e.g. 1.2.0")
	f.StringArrayVar(&p.meta, "meta", nil, "k=v metadata for the commit record (repeatable)")
	f.StringVar(&p.requestID, "request-id", "", "idempotency key (default: a new one per invocation)")
	f.StringVar(&p.format, "format", "", "input format for every FILE: parquet, csv, arrow or ndjson (default: by extension)")
	f.Var(&p.progress, "progress", "progress bar on stderr: auto (on a terminal), always or never")
	f.BoolVar(&p.json, "json", false, "print the commit as JSON")
	f.IntVar(&p.retries, "retries", 2, "times to retry a put the server could not be reached for (safe: same request id)")
	return cmd
}

// newRequestID is a random idempotency key for one invocation.
func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return "quiver-cli-" + hex.EncodeToString(b)
}

func (p *putFlags) descriptor(profile string) (*putDescriptor, error) {
	d := &putDescriptor{Path: profile, SchemaVersion: p.schemaVersion, RequestID: p.requestID}
	switch p.mode {
	case "append", "":
	case "write":
		d.Mode = "write"
	default:
		return nil, fmt.Errorf("--mode %q: want append or write", p.mode)
	}
	for _, c := range p.partitionBy {
		if c = strings.TrimSpace(c); c != "" {
			d.PartitionBy = append(d.PartitionBy, c)
		}
	}
	if len(d.PartitionBy) > 0 && d.Mode != "write" {
		return nil, errors.New("--partition-by needs --mode write (an append takes the partitioning of the version)")
	}
	for _, kv := range p.meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--meta %q: want key=value", kv)
		}
		if d.Metadata == nil {
			d.Metadata = map[string]string{}
		}
		d.Metadata[k] = v
	}
	if d.RequestID == "" {
		d.RequestID = newRequestID()
	}
	return d, nil
}

func runPut(ctx context.Context, p *putFlags, profile string, files []string, stdout, stderr io.Writer) error {
	desc, err := p.descriptor(profile)
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
	cmdBytes, err := json.Marshal(desc)
	if err != nil {
		return err
	}
	cl, err := p.conn.dial()
	if err != nil {
		return err
	}
	defer cl.Close()

	var rec *store.CommitRecord
	for attempt := 0; ; attempt++ {
		prog := newProgress(stderr, p.progress, total, true, "put "+profile)
		rec, err = putOnce(ctx, cl, cmdBytes, files, formats, prog, profile)
		prog.finish()
		if err == nil || attempt >= p.retries || ctx.Err() != nil || status.Code(err) != codes.Unavailable {
			break
		}
		wait := time.Duration(attempt+1) * time.Second
		fmt.Fprintf(stderr, "quiver: %v; retrying in %s (request id %s)\n", clientError(err, &p.conn), wait, desc.RequestID)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
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

// putOnce opens every file, checks they share the first one's columns and
// streams them all as one DoPut. Nothing is sent when a file cannot be
// opened or does not match.
func putOnce(ctx context.Context, cl flight.Client, cmdBytes []byte, files, formats []string, prog *progress, profile string) (*store.CommitRecord, error) {
	mem := memory.DefaultAllocator
	inputs := make([]*input, 0, len(files))
	defer func() {
		for _, in := range inputs {
			_ = in.Close()
		}
	}()
	for i, f := range files {
		in, err := openInput(ctx, f, formats[i], mem, prog)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, in)
		if i > 0 {
			if err := sameColumns(inputs[0].rdr.Schema(), in.rdr.Schema()); err != nil {
				return nil, fmt.Errorf("%s does not match %s (one put needs the same columns): %w", f, files[0], err)
			}
		}
	}
	schema := inputs[0].rdr.Schema()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a put that fails on our side is cancelled: it commits nothing
	stream, err := cl.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmdBytes})
	var rows int64
	sendErr := func() error {
		for _, in := range inputs {
			for in.rdr.Next() {
				rec := in.rdr.RecordBatch()
				if err := sendBatch(w, schema, rec); err != nil {
					return err // the server ended the put; Recv says why
				}
				rows += rec.NumRows()
				prog.describe(fmt.Sprintf("put %s: %s rows", profile, groupDigits(rows)))
			}
			if err := in.rdr.Err(); err != nil {
				return &localError{fmt.Errorf("%s: %w", in.path, err)}
			}
		}
		return nil
	}()
	var local *localError
	if errors.As(sendErr, &local) {
		cancel() // our input failed: the put must commit nothing
		_ = w.Close()
		return nil, local.err
	}
	if err := w.Close(); err != nil && sendErr == nil {
		sendErr = err
	}
	if err := stream.CloseSend(); err != nil && sendErr == nil {
		sendErr = err
	}
	res, err := stream.Recv()
	if err != nil {
		return nil, err // the server's verdict on the put, if it failed
	}
	if sendErr != nil {
		return nil, sendErr
	}
	var rec store.CommitRecord
	if err := json.Unmarshal(res.AppMetadata, &rec); err != nil {
		return nil, fmt.Errorf("the server's put result is not JSON: %w", err)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
	}
	return &rec, nil
}

// localError is a failure on our side of a put (a bad input file).
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// sendBatch writes rec with the stream's schema (the first file's; later
// files may differ in nullability or metadata only) in slices small enough
// for one gRPC message each.
func sendBatch(w *flight.Writer, schema *arrow.Schema, rec arrow.RecordBatch) error {
	if !rec.Schema().Equal(schema) {
		rec = array.NewRecordBatch(schema, rec.Columns(), rec.NumRows())
		defer rec.Release()
	}
	n := rec.NumRows()
	size := util.TotalRecordSize(rec)
	if size <= maxSendBatch || n <= 1 {
		return w.Write(rec)
	}
	step := max(n*maxSendBatch/size, 1)
	for off := int64(0); off < n; off += step {
		s := rec.NewSlice(off, min(off+step, n))
		err := w.Write(s)
		s.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// printCommit prints a commit record for people.
func printCommit(w io.Writer, verb string, rec *store.CommitRecord) error {
	files := "files"
	if len(rec.Files) == 1 {
		files = "file"
	}
	mode := string(rec.Mode)
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
