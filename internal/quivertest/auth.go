package quivertest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// TokenSHA256 is the hex SHA-256 of a bearer token, as an auth file's
// tokens name them.
func TokenSHA256(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// WriteJSON writes v as JSON to path (mode 0600) through a temp file and a
// rename, so that a server reloading the file (an auth file on SIGHUP)
// never reads half of it.
func WriteJSON(tb testing.TB, path string, v any) {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		tb.Fatal(err)
	}
}
