package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/quiverdb/quiver/flightserver"
)

func TestSuggest(t *testing.T) {
	names := []string{"sales/orders", "sales/returns", "other/orders", "hr/people", "a/b"}
	cases := []struct {
		typed string
		want  []string
	}{
		{"sales/ordrs", []string{"sales/orders"}},
		{"sales/oredrs", []string{"sales/orders"}}, // a swap is one edit
		{"Sales/Orders", []string{"sales/orders"}}, // case differs only
		{"orders", []string{"other/orders", "sales/orders"}},
		{"sales/orders", nil}, // exists: nothing to suggest
		{"nope/x", nil},
		{"hr/poeple/", []string{"hr/people"}},
		{"", nil},
		{"a/c", []string{"a/b"}},
	}
	for _, c := range cases {
		got := suggest(c.typed, names, 3)
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("suggest(%q) = %q, want %q", c.typed, got, c.want)
		}
	}
}

// Every error a person meets while following the README is one line, names
// what to do, and carries no internal prefix.
func TestFirstRunErrors(t *testing.T) {
	addr, dir := testServer(t)
	srv := "--server=" + addr
	csv := writeCSV(t, "orders.csv", "id,region\n1,eu\n2,us\n")
	mustRun(t, "put", srv, "sales/orders", csv)
	mustRun(t, "put", srv, "other/orders", csv)

	cases := []struct {
		args []string
		want string
	}{
		{[]string{"get", srv, "sales/ordrs"}, "profile not found: sales/ordrs (did you mean sales/orders?)"},
		{[]string{"get", srv, "orders"}, "profile not found: orders (did you mean other/orders or sales/orders?)"},
		{[]string{"versions", srv, "sales/ordes"}, "profile not found: sales/ordes (did you mean sales/orders?)"},
		{[]string{"versions", "--data-dir", dir, "sales/ordes"}, "profile not found: sales/ordes (did you mean sales/orders?)"},
		{[]string{"schema", srv, "nope/x"}, "profile not found: nope/x"},
		{[]string{"get", srv, "sales/orders", "--columns", "nope"}, `sales/orders: no column ["nope"]`},
		{[]string{"get", srv}, "get: missing PROFILE (usage: quiver get PROFILE [flags]; see quiver get --help)"},
		{[]string{"put", srv}, "put: missing PROFILE and FILE (usage: quiver put PROFILE FILE... [flags]; see quiver put --help)"},
		{[]string{"put", srv, "sales/orders"}, "put: missing FILE (usage:"},
		{[]string{"get", srv, "a", "b"}, `get: too many arguments: "b" (usage: quiver get PROFILE [flags]`},
		{[]string{"sweep", srv, "x"}, `sweep takes no arguments, got "x"`},
		{[]string{"get", srv, "--colums", "id", "sales/orders"}, "get: unknown flag: --colums (did you mean --columns?)"},
		{[]string{"gett"}, `unknown command "gett" (did you mean get?); see quiver --help`},
		{[]string{"verify", srv, "slaes"}, "no profiles under slaes: nothing was verified (did you mean sales?)"},
		{[]string{"verify", "--data-dir", dir, "sales/ordrs"}, "no profiles under sales/ordrs: nothing was verified (did you mean sales/orders?)"},
	}
	if _, stderr, err := run(t, "ls", srv, "slaes"); err != nil || stderr != "no profiles under slaes (did you mean sales?)\n" {
		t.Errorf("ls slaes: %q %v", stderr, err)
	}
	for _, c := range cases {
		_, _, err := run(t, c.args...)
		if err == nil {
			t.Errorf("%v: no error", c.args)
			continue
		}
		msg := oneLine(err).Error()
		if !strings.HasPrefix(msg, c.want) {
			t.Errorf("%v:\n got %q\nwant %q…", c.args, msg, c.want)
		}
		for _, bad := range []string{"\n", "store:", "catalog:", "codec:", "read sales", "quiver: quiver", dir} {
			if strings.Contains(msg, bad) {
				t.Errorf("%v: %q contains %q", c.args, msg, bad)
			}
		}
	}
}

// A suggestion only names profiles the caller may list: a token limited to
// the prefix "sales" is never told that other/orders exists.
func TestSuggestionsOnlyVisibleProfiles(t *testing.T) {
	sum := func(tok string) string { h := sha256.Sum256([]byte(tok)); return hex.EncodeToString(h[:]) }
	af := &flightserver.AuthFile{Tokens: []flightserver.AuthToken{
		{SHA256: sum("admin-token-0123456789"), Identity: "admin", Role: "admin"},
		{SHA256: sum("sales-token-0123456789"), Identity: "sales", Role: "read", Prefixes: []string{"sales"}},
	}}
	auth, err := flightserver.NewAuthenticator(af)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := testServer(t, flightserver.WithAuth(auth))
	srv := "--server=" + addr
	csv := writeCSV(t, "orders.csv", "id\n1\n")
	mustRun(t, "put", srv, "--token", "admin-token-0123456789", "sales/orders", csv)
	mustRun(t, "put", srv, "--token", "admin-token-0123456789", "other/orders", csv)

	for _, c := range []struct{ typed, want string }{
		{"sales/ordrs", "profile not found: sales/ordrs (did you mean sales/orders?)"},
		{"orders", "sales may not GetFlightInfo orders: profile is outside the identity's key prefixes (did you mean sales/orders?)"},
		{"other/ordrs", "sales may not GetFlightInfo other/ordrs: profile is outside the identity's key prefixes"},
	} {
		_, _, err = run(t, "get", srv, "--token", "sales-token-0123456789", c.typed)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.typed, err, c.want)
		}
	}
	_, _, err = run(t, "get", srv, "--token", "admin-token-0123456789", "orders")
	if err == nil || !strings.Contains(err.Error(), "other/orders or sales/orders") {
		t.Errorf("admin: %v", err)
	}
}

func TestOneLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{"unknown command \"gett\" for \"quiver\"\n\nDid you mean this?\n\tget\n", `unknown command "gett" (did you mean get?); see quiver --help`},
		{"unknown command \"zzz\" for \"quiver\"\n", `unknown command "zzz"; see quiver --help`},
		{"a\nb", "a b"},
		{"plain", "plain"},
	}
	for _, c := range cases {
		if got := oneLine(errors.New(c.in)).Error(); got != c.want {
			t.Errorf("oneLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
