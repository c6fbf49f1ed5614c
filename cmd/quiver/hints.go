package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/store"
)

// Hints for a person at a terminal: a usage line when arguments are
// missing, "did you mean" for a mistyped profile, flag or command, all on
// the one line `quiver: <message>` that main prints.

// addHints wraps every subcommand's argument check so that a wrong number
// of arguments says what is missing and how the command is used, and makes
// unknown flags suggest the closest one.
func addHints(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	for _, c := range root.Commands() {
		if c.Args == nil {
			continue
		}
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError(cmd, args)
			}
			return nil
		}
	}
}

// placeholders are the argument names in a command's Use line: "get
// PROFILE" → [PROFILE]; "put PROFILE FILE..." → [PROFILE FILE...]; "ls
// [PREFIX]" → [[PREFIX]].
func placeholders(cmd *cobra.Command) []string {
	f := strings.Fields(cmd.Use)
	if len(f) <= 1 {
		return nil
	}
	var out []string
	for _, w := range f[1:] {
		if strings.HasPrefix(w, "-") {
			break // "keygen --out FILE": flags, not arguments
		}
		out = append(out, w)
	}
	return out
}

// usageError is the one-line error for a wrong number of arguments.
func usageError(cmd *cobra.Command, args []string) error {
	want := placeholders(cmd)
	required := 0
	for _, w := range want {
		if !strings.HasPrefix(w, "[") {
			required++
		}
	}
	usage := fmt.Sprintf("usage: %s; see %s --help", strings.TrimSuffix(cmd.UseLine(), " [flags]")+" [flags]", cmd.CommandPath())
	if len(args) < required {
		missing := want[len(args):required]
		for i, m := range missing {
			missing[i] = strings.TrimSuffix(m, "...")
		}
		return fmt.Errorf("%s: missing %s (%s)", cmd.Name(), strings.Join(missing, " and "), usage)
	}
	extra := args
	if len(args) > len(want) {
		extra = args[len(want):]
	}
	quoted := make([]string, len(extra))
	for i, a := range extra {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	if len(want) == 0 {
		return fmt.Errorf("%s takes no arguments, got %s (%s)", cmd.Name(), strings.Join(quoted, " "), usage)
	}
	return fmt.Errorf("%s: too many arguments: %s (%s)", cmd.Name(), strings.Join(quoted, " "), usage)
}

var unknownFlag = regexp.MustCompile(`^unknown (?:shorthand )?flag: '?-{1,2}([^'\s=]+)`)

// flagError adds "did you mean --x?" to an unknown flag.
func flagError(cmd *cobra.Command, err error) error {
	m := unknownFlag.FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("%s: %w (see %s --help)", cmd.Name(), err, cmd.CommandPath())
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if s := suggest(m[1], names, 1); len(s) > 0 {
		return fmt.Errorf("%s: %w (did you mean --%s?)", cmd.Name(), err, s[0])
	}
	return fmt.Errorf("%s: %w (see %s --help)", cmd.Name(), err, cmd.CommandPath())
}

var unknownCommand = regexp.MustCompile(`^unknown command ("[^"]*") for "[^"]*"`)

// oneLine turns cobra's multi-line errors (an unknown command with its
// suggestions) into one line.
func oneLine(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "\n") {
		return err
	}
	if m := unknownCommand.FindStringSubmatch(msg); m != nil {
		var sugg []string
		for _, l := range strings.Split(msg, "\n") {
			if strings.HasPrefix(l, "\t") {
				sugg = append(sugg, strings.TrimSpace(l))
			}
		}
		if len(sugg) > 0 {
			return fmt.Errorf("unknown command %s (did you mean %s?); see quiver --help", m[1], strings.Join(sugg, " or "))
		}
		return fmt.Errorf("unknown command %s; see quiver --help", m[1])
	}
	return errors.New(strings.Join(strings.Fields(msg), " "))
}

// isMisnamed tells an error that may come of a mistyped profile name: a
// missing profile (not a missing version), from the server or the store,
// or a name outside the caller's key prefixes.
func isMisnamed(err error) bool {
	if errors.Is(err, store.ErrNotFound) && !strings.Contains(err.Error(), "holds other profiles") {
		return true
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		st := se.GRPCStatus()
		switch st.Code() {
		case codes.NotFound:
			return strings.Contains(st.Message(), "profile not found")
		case codes.PermissionDenied:
			return strings.Contains(st.Message(), "outside the identity's key prefixes")
		}
	}
	return false
}

// suggestTimeout bounds the listing behind a suggestion: it is a nicety on
// the way to an error.
const suggestTimeout = 5 * time.Second

// withSuggestion adds "(did you mean sales/orders?)" to a missing-profile
// error (or one for a name outside the caller's prefixes), from the
// profiles list answers: the server's ListFlights (only
// what the caller may read) or the data dir. Any other error, or a failed
// listing, leaves err as it is.
func withSuggestion(ctx context.Context, err error, name string, list func(ctx context.Context) ([]string, error)) error {
	if err == nil || name == "" || !isMisnamed(err) {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, suggestTimeout)
	defer cancel()
	names, lerr := list(ctx)
	if lerr != nil {
		return err
	}
	near := suggest(name, names, 3)
	if len(near) == 0 {
		return err
	}
	return &hintError{err: err, hint: "did you mean " + strings.Join(near, " or ") + "?"}
}

// hintError is err with a hint for the person reading it; errors.Is and
// GRPCStatus still see err.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + " (" + e.hint + ")" }
func (e *hintError) Unwrap() error { return e.err }

// suggest is the names a mistyped one most likely meant, best first: a
// case-insensitive edit distance of at most len/4 (2 to 4), or, for a
// name of one key, a profile whose last key it is ("orders" for
// "sales/orders"). The Python client (python/quiver/_errors.py) uses the
// same rule.
func suggest(name string, candidates []string, n int) []string {
	name = strings.Trim(name, "/")
	want := strings.ToLower(name)
	if want == "" {
		return nil
	}
	limit := max(2, min(4, len(want)/4))
	oneKey := !strings.Contains(want, "/")
	type scored struct {
		d    int
		name string
	}
	var out []scored
	for _, c := range candidates {
		if c == name {
			continue
		}
		lc := strings.ToLower(c)
		if d := distance(want, lc); d <= limit {
			out = append(out, scored{d, c})
		} else if oneKey && strings.HasSuffix(lc, "/"+want) {
			out = append(out, scored{limit + 1, c})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].d != out[j].d {
			return out[i].d < out[j].d
		}
		return out[i].name < out[j].name
	})
	var names []string
	for i := 0; i < len(out) && i < n; i++ {
		names = append(names, out[i].name)
	}
	return names
}

// distance is the optimal string alignment distance of a and b (edits,
// with a swap of neighbours counted as one), on bytes.
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// prefixHint is " (did you mean sales?)" for a key prefix that matches no
// profile, from the profiles the caller may list and their prefixes; ""
// when nothing is close.
func prefixHint(ctx context.Context, a admin, prefix string) string {
	ctx, cancel := context.WithTimeout(ctx, suggestTimeout)
	defer cancel()
	names, err := a.Profiles(ctx, "")
	if err != nil {
		return ""
	}
	seen := map[string]bool{}
	var cands []string
	for _, n := range names {
		keys := strings.Split(n, "/")
		for i := 1; i <= len(keys); i++ {
			if p := strings.Join(keys[:i], "/"); !seen[p] {
				seen[p] = true
				cands = append(cands, p)
			}
		}
	}
	if near := suggest(prefix, cands, 3); len(near) > 0 {
		return " (did you mean " + strings.Join(near, " or ") + "?)"
	}
	return ""
}
