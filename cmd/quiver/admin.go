package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/store"
)

// adminFlags are the flags of every admin subcommand: a server to ask, or
// a data dir to work on directly.
type adminFlags struct {
	conn    connFlags
	dataDir string
	storage storageFlags
	json    bool
	cmd     *cobra.Command
}

const offlineHelp = `

Against a server by default (--server, QUIVER_SERVER); with --data-dir DIR it
works directly on the data directory instead, for an operator on the box when
the server is down.`

// adminCommand builds an admin subcommand; run gets the backend the flags
// chose.
func adminCommand(stderr io.Writer, cmd *cobra.Command, withJSON bool, run func(ctx context.Context, a admin, f *adminFlags, args []string) error) *cobra.Command {
	f := adminFlags{cmd: cmd}
	addConnFlags(cmd, &f.conn)
	cmd.Flags().StringVar(&f.dataDir, "data-dir", "", "work on this data directory (or s3://bucket/prefix) directly, without a server")
	addStorageFlags(cmd.Flags(), &f.storage)
	if withJSON {
		cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	}
	cmd.Long += offlineHelp
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, stop := signalContext(cmd)
		defer stop()
		var a admin
		if f.dataDir != "" {
			o, err := openOffline(ctx, f.dataDir, f.storage, stderr)
			if err != nil {
				return err
			}
			a = o
		} else {
			cl, err := f.conn.connect(ctx)
			if err != nil {
				return err
			}
			a = &remote{c: cl}
		}
		err := run(ctx, a, &f, args)
		if len(args) == 1 && strings.Contains(cmd.Use, "PROFILE") {
			err = withSuggestion(ctx, err, args[0], func(ctx context.Context) ([]string, error) { return a.Profiles(ctx, "") })
		}
		if cerr := a.Close(); err == nil {
			err = cerr
		}
		return clientError(err, &f.conn)
	}
	return cmd
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// lsRow is one profile in `quiver ls`.
type lsRow struct {
	Path       string    `json:"path"`
	Latest     string    `json:"latest"`
	Versions   int       `json:"versions"`
	Files      int       `json:"files"`
	Rows       int64     `json:"rows"`
	Bytes      int64     `json:"bytes"`
	LastCommit time.Time `json:"last_commit"`
}

func newLs(stdout, stderr io.Writer) *cobra.Command {
	return adminCommand(stderr, &cobra.Command{
		Use:   "ls [PREFIX]",
		Short: "List profiles with their latest version, rows, bytes and last commit",
		Long: `List the profiles under a key prefix (matched component by component:
"sales" matches sales/orders, not salesman/x), or all of them. Rows, bytes and
the last commit time are those of each profile's latest version.`,
		Args: cobra.MaximumNArgs(1),
	}, true, func(ctx context.Context, a admin, f *adminFlags, args []string) error {
		prefix := ""
		if len(args) == 1 {
			prefix = args[0]
		}
		names, err := a.Profiles(ctx, prefix)
		if err != nil {
			return err
		}
		rows := make([]lsRow, 0, len(names))
		for _, n := range names {
			vr, err := a.Versions(ctx, n)
			if err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			row := lsRow{Path: n, Latest: vr.Latest, Versions: len(vr.Versions)}
			for _, v := range vr.Versions {
				if v.Version == vr.Latest {
					row.Files, row.Rows, row.Bytes, row.LastCommit = v.Files, v.Rows, v.Bytes, v.LastCommit
					if row.LastCommit.IsZero() {
						row.LastCommit = v.Created
					}
				}
			}
			rows = append(rows, row)
		}
		if f.json {
			return printJSON(stdout, rows)
		}
		if len(rows) == 0 {
			if prefix != "" {
				_, err := fmt.Fprintf(stderr, "no profiles under %s%s\n", prefix, prefixHint(ctx, a, prefix))
				return err
			}
			_, err := fmt.Fprintln(stderr, "no profiles")
			return err
		}
		t := newTextTable("PROFILE", "LATEST", "VERSIONS", "FILES", "ROWS", "BYTES", "LAST COMMIT")
		t.rightAlign(2, 3, 4, 5)
		t.bold = colorOK(stdout)
		for _, r := range rows {
			t.row(r.Path, r.Latest, fmt.Sprint(r.Versions), fmt.Sprint(r.Files), groupDigits(r.Rows), humanBytes(r.Bytes), when(r.LastCommit))
		}
		return t.write(stdout, "")
	})
}

func newVersions(stdout, stderr io.Writer) *cobra.Command {
	return adminCommand(stderr, &cobra.Command{
		Use:   "versions PROFILE",
		Short: "List the versions of a profile",
		Long:  `List every version of a profile, oldest first; * marks the latest.`,
		Args:  cobra.ExactArgs(1),
	}, true, func(ctx context.Context, a admin, f *adminFlags, args []string) error {
		vr, err := a.Versions(ctx, args[0])
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(stdout, vr)
		}
		t := newTextTable("", "VERSION", "FORMAT", "FILES", "ROWS", "BYTES", "COMMITS", "SCHEMA", "PARTITION BY", "CREATED", "LAST COMMIT")
		t.rightAlign(3, 4, 5, 6)
		t.bold = colorOK(stdout)
		for _, v := range vr.Versions {
			mark := ""
			if v.Version == vr.Latest {
				mark = "*"
			}
			sv := schemaVersionsText(v)
			pb := strings.Join(v.PartitionBy, ",")
			if pb == "" {
				pb = "-"
			}
			t.row(mark, v.Version, string(v.Format), fmt.Sprint(v.Files), groupDigits(v.Rows), humanBytes(v.Bytes),
				fmt.Sprint(v.Commits), sv, pb, when(v.Created), when(v.LastCommit))
		}
		if err := t.write(stdout, ""); err != nil {
			return err
		}
		if vr.SchemaPolicy != "" {
			_, err = fmt.Fprintf(stdout, "schema policy: %s\n", vr.SchemaPolicy)
		}
		return err
	})
}

// schemaVersionsText is a version's schema versions for the table: the
// one it has ("1.0.0", "-" for none), or, when appends evolved it, each
// with its files and rows ("1.0.0 (3 files, 1,200 rows), 1.1.0 (…)").
func schemaVersionsText(v catalog.VersionSummary) string {
	if len(v.SchemaVersions) <= 1 {
		if v.SchemaVersion == "" {
			return "-"
		}
		return v.SchemaVersion
	}
	parts := make([]string, len(v.SchemaVersions))
	for i, c := range v.SchemaVersions {
		sv := c.SchemaVersion
		if sv == "" {
			sv = "-"
		}
		files := "files"
		if c.Files == 1 {
			files = "file"
		}
		rows := "rows"
		if c.Rows == 1 {
			rows = "row"
		}
		parts[i] = fmt.Sprintf("%s (%d %s, %s %s)", sv, c.Files, files, groupDigits(c.Rows), rows)
	}
	return strings.Join(parts, ", ")
}

func newSchemaPolicy(stdout, stderr io.Writer) *cobra.Command {
	return adminCommand(stderr, &cobra.Command{
		Use:   "schema-policy PROFILE additive|none",
		Short: "Set a profile's schema policy",
		Long: `Set a profile's schema policy. Under "additive", a write of a new version may
only keep the previous version's columns or add nullable ones (raising the
schema version); "none" lifts the contract. Appends always follow the additive
rule. The policy is kept in the profile's .quiver.policy.json.`,
		Args: cobra.ExactArgs(2),
	}, true, func(ctx context.Context, a admin, f *adminFlags, args []string) error {
		res, err := a.SetSchemaPolicy(ctx, args[0], args[1])
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(stdout, res)
		}
		_, err = fmt.Fprintf(stdout, "%s: schema policy %s\n", res.Path, res.SchemaPolicy)
		return err
	})
}

func newSchema(stdout, stderr io.Writer) *cobra.Command {
	var version string
	cmd := adminCommand(stderr, &cobra.Command{
		Use:   "schema PROFILE",
		Short: "Print the Arrow schema of a profile",
		Long:  `Print the Arrow schema of a profile's latest version (or --version), with its metadata.`,
		Args:  cobra.ExactArgs(1),
	}, true, func(ctx context.Context, a admin, f *adminFlags, args []string) error {
		v, err := parseVersion(version)
		if err != nil {
			return err
		}
		vs, _ := v.(string)
		sc, err := a.Schema(ctx, args[0], vs)
		if err != nil {
			return err
		}
		if f.json {
			type col struct {
				Name     string            `json:"name"`
				Type     string            `json:"type"`
				Nullable bool              `json:"nullable"`
				Metadata map[string]string `json:"metadata,omitempty"`
			}
			out := struct {
				Columns  []col             `json:"columns"`
				Metadata map[string]string `json:"metadata,omitempty"`
			}{Metadata: sc.Metadata().ToMap()}
			for _, fl := range sc.Fields() {
				out.Columns = append(out.Columns, col{fl.Name, fl.Type.String(), fl.Nullable, fl.Metadata.ToMap()})
			}
			return printJSON(stdout, out)
		}
		t := newTextTable("COLUMN", "TYPE", "NULLABLE", "METADATA")
		t.bold = colorOK(stdout)
		for _, fl := range sc.Fields() {
			null := "no"
			if fl.Nullable {
				null = "yes"
			}
			t.row(fl.Name, fl.Type.String(), null, metadataString(fl.Metadata.ToMap()))
		}
		if err := t.write(stdout, ""); err != nil {
			return err
		}
		if md := sc.Metadata(); md.Len() > 0 {
			_, err = fmt.Fprintf(stdout, "schema metadata: %s\n", metadataString(md.ToMap()))
		}
		return err
	})
	cmd.Flags().StringVar(&version, "version", "", "version (v3 or 3; default the latest)")
	return cmd
}

func metadataString(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	b, _ := json.Marshal(m) // sorted keys, quoted values
	s := string(b)
	if len(s) > 80 {
		s = s[:79] + "…"
	}
	return s
}

func newLineage(stdout, stderr io.Writer) *cobra.Command {
	return adminCommand(stderr, &cobra.Command{
		Use:   "lineage PROFILE",
		Short: "Print a profile's commit records as NDJSON, oldest first",
		Long: `Print every commit record of a profile (who wrote what, when, with which
SHA-256 hashes) as NDJSON, one record per line, oldest first.`,
		Args: cobra.ExactArgs(1),
	}, false, func(ctx context.Context, a admin, _ *adminFlags, args []string) error {
		return a.Lineage(ctx, args[0], stdout)
	})
}

func newVerify(stdout, stderr io.Writer) *cobra.Command {
	var sample float64
	var seed int64
	var pubKeyFile string
	cmd := adminCommand(stderr, &cobra.Command{
		Use:   "verify [PREFIX]",
		Short: "Re-hash data files against their commit records; exit 1 on any problem",
		Long: `Re-hash every committed data file of the profiles under PREFIX (or all) and
compare it with its commit record, and walk each profile's commit log as a
hash chain. Reports mutated, missing, orphan and unrecorded files, broken
chains, stale temps and stale locks, symbolic links and unknown entries.
With --public-key every commit record must carry a valid signature by the
server's --signing-key. Exits 0 when the store is clean, 1 when anything is
wrong. --json output includes each profile's chain head (seq and hash):
keep it elsewhere to detect a truncated history later.`,
		Args: cobra.MaximumNArgs(1),
	}, true, func(ctx context.Context, a admin, f *adminFlags, args []string) error {
		req := client.VerifyRequest{Sample: sample, Seed: seed}
		if pubKeyFile != "" {
			b, err := os.ReadFile(pubKeyFile)
			if err != nil {
				return fmt.Errorf("--public-key: %w", err)
			}
			if _, err := store.ParsePublicKey(b); err != nil {
				return fmt.Errorf("--public-key: %w", err)
			}
			req.PublicKey = string(b)
		}
		if len(args) == 1 {
			req.Prefix = args[0]
		}
		rep, err := a.Verify(ctx, req)
		if err != nil {
			return err
		}
		if req.Prefix != "" && rep.CheckedFiles == 0 && len(rep.Problems) == 0 {
			// Nothing verified is not "ok" to an auditor who mistyped.
			if names, err := a.Profiles(ctx, req.Prefix); err == nil && len(names) == 0 {
				return fmt.Errorf("no profiles under %s: nothing was verified%s", req.Prefix, prefixHint(ctx, a, req.Prefix))
			}
		}
		if f.json {
			if err := printJSON(stdout, rep); err != nil {
				return err
			}
		} else if err := printVerify(stdout, rep); err != nil {
			return err
		}
		if !rep.OK || len(rep.Problems) > 0 {
			n := len(rep.Problems)
			if n == 1 {
				return errors.New("verify found 1 problem")
			}
			return fmt.Errorf("verify found %d problems", n)
		}
		return nil
	})
	cmd.Flags().Float64Var(&sample, "sample", 0, "re-hash only this fraction of files, 0 < rate <= 1 (every file is still listed and sized)")
	cmd.Flags().Int64Var(&seed, "seed", 0, "with --sample: the same seed checks the same files")
	cmd.Flags().StringVar(&pubKeyFile, "public-key", "", "ed25519 public key file (PEM, from quiver keygen): every commit record must be signed by its private key")
	return cmd
}

func printVerify(w io.Writer, rep *catalog.VerifyResult) error {
	if len(rep.Problems) == 0 {
		_, err := fmt.Fprintf(w, "ok: %s files checked, no problems\n", groupDigits(int64(rep.CheckedFiles)))
		return err
	}
	fmt.Fprintf(w, "%s files checked, %d problems:\n", groupDigits(int64(rep.CheckedFiles)), len(rep.Problems))
	t := newTextTable("KIND", "PATH", "DETAIL")
	for _, p := range rep.Problems {
		t.row(p.Kind, p.Path, p.Detail)
	}
	if err := t.write(w, "  "); err != nil {
		return err
	}
	kinds := map[string]string{
		catalog.ProblemMutated:    "a committed file's bytes changed: restore it from a backup",
		catalog.ProblemMissing:    "a committed file is gone: restore it from a backup",
		catalog.ProblemOrphan:     "a file no commit lists (an interrupted put): `quiver sweep` removes it once stale",
		catalog.ProblemUnrecorded: "a file with no commit record (written by pyrosome or by hand): readers see it",
		catalog.ProblemStaleTemp:  "a temp file a killed writer left: `quiver sweep` removes it",
		catalog.ProblemStaleLock:  "a lock whose owner is gone: `quiver break-lock PROFILE`",
	}
	seen := map[string]bool{}
	for _, p := range rep.Problems {
		if h, ok := kinds[p.Kind]; ok && !seen[p.Kind] {
			seen[p.Kind] = true
			fmt.Fprintf(w, "  %s: %s\n", p.Kind, h)
		}
	}
	return nil
}

func newGC(stdout, stderr io.Writer) *cobra.Command {
	var keep int
	var grace time.Duration
	cmd := adminCommand(stderr, &cobra.Command{
		Use:   "gc PROFILE",
		Short: "Remove old versions of a profile, keeping the newest --keep",
		Long: `Remove whole old versions of a profile, keeping the newest --keep (at least 1:
the latest is never removed). A version superseded less than --grace ago
stays, for readers still holding tickets for it (default: the server's grace
period, 1h; 0 removes at once).`,
		Args: cobra.ExactArgs(1),
	}, true, func(ctx context.Context, a admin, f *adminFlags, args []string) error {
		var g *time.Duration
		if gf := lookupFlag(f, "grace"); gf {
			g = &grace
		}
		rep, err := a.GC(ctx, args[0], keep, g)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(stdout, rep)
		}
		if len(rep.Removed) == 0 {
			fmt.Fprintf(stdout, "%s: nothing removed\n", args[0])
		} else {
			fmt.Fprintf(stdout, "%s: removed %s\n", args[0], strings.Join(rep.Removed, ", "))
		}
		for _, k := range rep.Kept {
			fmt.Fprintf(stdout, "  kept %s: %s\n", k.Version, k.Reason)
		}
		return nil
	})
	cmd.Flags().IntVar(&keep, "keep", 1, "newest versions to keep (>= 1)")
	cmd.Flags().DurationVar(&grace, "grace", catalog.DefaultGrace, "keep versions superseded less than this long ago (default: the server's)")
	return cmd
}

// lookupFlag reports whether a flag was set on the command line. The
// admin flags carry their command so defaults can be told from choices.
func lookupFlag(f *adminFlags, name string) bool {
	return f.cmd != nil && f.cmd.Flags().Changed(name)
}

func newCompact(stdout, stderr io.Writer) *cobra.Command {
	return adminCommand(stderr, &cobra.Command{
		Use:   "compact PROFILE",
		Short: "Rewrite the latest version of a profile as a new version with few large files",
		Long: `Rewrite the latest version of a profile as a new version with the same rows,
schema and partitioning in few large files. The old version stays until gc.`,
		Args: cobra.ExactArgs(1),
	}, true, func(ctx context.Context, a admin, f *adminFlags, args []string) error {
		rec, err := a.Compact(ctx, args[0])
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(stdout, rec)
		}
		return printCommit(stdout, "compacted into", rec)
	})
}

func newSweep(stdout, stderr io.Writer) *cobra.Command {
	var older time.Duration
	cmd := adminCommand(stderr, &cobra.Command{
		Use:   "sweep",
		Short: "Remove what killed writers left behind (stale temps, uncommitted files)",
		Long: `Remove, in every profile, once they are older than --older-than (default 1h):
hidden temp files, data files Quiver wrote that no commit lists (at a version's
root or under its partition directories), version directories never committed,
and pyrosome writes abandoned before their manifest move; and, at any age, what is
left of retired versions and the uncommitted data files of puts whose process
(named in their index's claim: this host, boot and pid namespace) is gone.
Committed data is never touched, nor anything sweep
cannot classify, nor a profile whose commit log is damaged (see docs/format.md,
"Sweep").`,
		Args: cobra.NoArgs,
	}, true, func(ctx context.Context, a admin, f *adminFlags, _ []string) error {
		var o *time.Duration
		if lookupFlag(f, "older-than") {
			o = &older
		}
		rep, err := a.Sweep(ctx, o)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(stdout, rep)
		}
		if len(rep.Removed)+len(rep.Skipped)+len(rep.Settled) == 0 {
			_, err := fmt.Fprintln(stdout, "nothing to sweep")
			return err
		}
		if len(rep.Removed) > 0 {
			fmt.Fprintf(stdout, "removed %d:\n", len(rep.Removed))
			for _, r := range rep.Removed {
				fmt.Fprintf(stdout, "  %s\n", r)
			}
		}
		if len(rep.Settled) > 0 {
			fmt.Fprintf(stdout, "manifest written from the commit log %d:\n", len(rep.Settled))
			for _, r := range rep.Settled {
				fmt.Fprintf(stdout, "  %s\n", r)
			}
		}
		if len(rep.Skipped) > 0 {
			fmt.Fprintf(stdout, "left alone %d:\n", len(rep.Skipped))
			for _, p := range rep.Skipped {
				fmt.Fprintf(stdout, "  %s %s: %s\n", p.Kind, p.Path, p.Detail)
			}
		}
		return nil
	})
	cmd.Flags().DurationVar(&older, "older-than", catalog.DefaultSweepAge, "only what is older than this")
	return cmd
}

func newBreakLock(stdout, stderr io.Writer) *cobra.Command {
	return adminCommand(stderr, &cobra.Command{
		Use:   "break-lock PROFILE",
		Short: "Break a profile's manifest lock if its owner is provably gone",
		Long: `Break a profile's manifest lock, but only when its owner process is gone (same
host) or the lock is older than the stale limit. Exits 1 when the lock was not
broken, saying why.`,
		Args: cobra.ExactArgs(1),
	}, true, func(ctx context.Context, a admin, f *adminFlags, args []string) error {
		res, err := a.BreakLock(ctx, args[0])
		if err != nil {
			return err
		}
		if f.json {
			if err := printJSON(stdout, res); err != nil {
				return err
			}
		} else if res.Broken {
			fmt.Fprintf(stdout, "broke the lock of %s: %s\n", args[0], res.Reason)
		}
		if !res.Broken {
			return fmt.Errorf("lock not broken: %s", res.Reason)
		}
		return nil
	})
}
