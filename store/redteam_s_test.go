package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPutOnMalformedLogIsDataLoss: a put onto a commit log a line of which
// is not as Quiver wrote it (a blank line at the end of the last segment
// or the start of an earlier one, a CRLF or a trailing space on the last
// record, a record written twice) is refused with the store's corruption
// error, as reads are, and writes nothing. The error must not carry an
// io.EOF: the server took one for the end of the client's stream and
// answered INVALID_ARGUMENT "put <profile>" (red team round 19, t04).
func TestPutOnMalformedLogIsDataLoss(t *testing.T) {
	for _, c := range []struct {
		name   string
		seg    int64 // the segment tampered
		tamper func(line string) string
	}{
		{"blank line after the last record", 3, func(b string) string { return b + "\n" }},
		{"blank line before an earlier record", 1, func(b string) string { return "\n" + b }},
		{"two blank lines after a middle record", 2, func(b string) string { return b + "\n\n" }},
		{"a line of spaces", 3, func(b string) string { return b + "   \n" }},
		{"CRLF", 3, func(b string) string { return strings.TrimSuffix(b, "\n") + "\r\n" }},
		{"trailing space", 3, func(b string) string { return strings.TrimSuffix(b, "\n") + " \n" }},
		{"the last record twice", 3, func(b string) string { return b + b }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, dir := newTestStore(t)
			keys := []string{"t04", "p"}
			for i := range 3 {
				put(t, s, ModeAppend, keys, ids(int64(i)), PutOptions{})
			}
			seg := filepath.Join(dir, "t04", "p", logDir, segmentName(c.seg))
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(seg, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(seg, []byte(c.tamper(string(b))), 0o644); err != nil {
				t.Fatal(err)
			}
			before := snapshotDir(t, dir)
			// A server that reads the log afresh (the one that wrote it
			// keeps its view and reads only segments past it: the chain
			// of what it read is verify's to re-check).
			fresh, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []Mode{ModeAppend, ModeWrite} {
				rdr := ids(9)
				_, err := fresh.Put(context.Background(), keys, rdr, PutOptions{Mode: m})
				rdr.Release()
				var ce *CorruptionError
				if !errors.As(err, &ce) && !errors.Is(err, ErrDataLoss) {
					t.Errorf("%s: %v, want a CorruptionError or ErrDataLoss", m, err)
				}
				if errors.Is(err, io.EOF) {
					t.Errorf("%s: %v carries io.EOF (read as the end of the client's stream)", m, err)
				}
				if err != nil && strings.Contains(err.Error(), dir) {
					t.Errorf("%s: %v names the server path", m, err)
				}
			}
			if after := snapshotDir(t, dir); after != before {
				t.Errorf("a refused put changed the data directory:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// snapshotDir describes every entry under dir with its content.
func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			fmt.Fprintf(&sb, "%s/\n", rel)
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&sb, "%s %q\n", rel, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}
