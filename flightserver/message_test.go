package flightserver

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/store"
)

// The messages people read carry no package tags and keep the profile.
func TestPublicMessage(t *testing.T) {
	cases := []struct {
		name string
		err  error
		code codes.Code
		want string
	}{
		{"not found", fmt.Errorf("%w: sales/ordrs", store.ErrNotFound), codes.NotFound,
			"profile not found: sales/ordrs"},
		{"wrapped not found", fmt.Errorf("read sales/ordrs: %w", fmt.Errorf("%w: sales/ordrs", store.ErrNotFound)), codes.NotFound,
			"profile not found: sales/ordrs"},
		{"op prefix kept as the profile", fmt.Errorf("read sales/orders: %w: no column [\"nope\"]", store.ErrInvalidArgument), codes.InvalidArgument,
			`sales/orders: no column ["nope"]`},
		{"op prefix with a file", fmt.Errorf("read sales/orders v0/1.parquet: %w: size 3, recorded 4", store.ErrDataLoss), codes.DataLoss,
			"sales/orders v0/1.parquet: committed data lost or altered: size 3, recorded 4"},
		{"nested ops, profile named", fmt.Errorf("put a/b: commit a/b: %w: a/b is locked", store.ErrLockTimeout), codes.Unavailable,
			"manifest lock timeout: a/b is locked"},
		{"version", fmt.Errorf("%w: sales/orders has no version v9", store.ErrVersionNotFound), codes.NotFound,
			"version not found: sales/orders has no version v9"},
		{"unknown field", fmt.Errorf("%w: CMD descriptor is not valid JSON: json: unknown field \"filter\"", catalog.ErrInvalid), codes.InvalidArgument,
			`CMD descriptor has an unknown field "filter"`},
		{"unknown field (exact-case check)", fmt.Errorf("%w: ticket is not valid JSON: unknown field \"PATH\"", catalog.ErrInvalid), codes.InvalidArgument,
			`ticket has an unknown field "PATH"`},
		{"bad key in the middle", fmt.Errorf("descriptor path: %w: key \"..\" resolves outside the data directory", store.ErrInvalidKey), codes.InvalidArgument,
			`descriptor path: invalid key: key ".." resolves outside the data directory`},
		{"schema mismatch kept", fmt.Errorf("append x/y: %w: columns [\"a\"] do not match x/y v0", store.ErrSchemaMismatch), codes.InvalidArgument,
			`schema mismatch: columns ["a"] do not match x/y v0`},
		{"unknown action", fmt.Errorf("%w: \"nope\" (see ListActions)", catalog.ErrUnknownAction), codes.Unimplemented,
			`unknown action: "nope" (see ListActions)`},
		{"a column named store", fmt.Errorf("%w: no column [\"store\"]", store.ErrInvalidArgument), codes.InvalidArgument,
			`no column ["store"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := status.Convert(statusOf(c.err))
			if st.Code() != c.code || st.Message() != c.want {
				t.Errorf("statusOf(%q) = %s %q, want %s %q", c.err, st.Code(), st.Message(), c.code, c.want)
			}
			for _, tag := range []string{"store:", "catalog:", "codec:"} {
				if strings.Contains(st.Message(), tag) {
					t.Errorf("%q still carries %q", st.Message(), tag)
				}
			}
		})
	}
}

// Cleaning only ever removes words (a message never grows), and never
// panics on odd input: messages quote clients' keys and column names.
func FuzzPublicMessage(f *testing.F) {
	for _, s := range []string{"store: profile not found: a", "read a/b: invalid argument: x", "read : ", "list a b c: d", ": : :", "read a: read a: store: store: x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := PublicMessage(errors.New(s)); len(got) > len(s) {
			t.Fatalf("%q grew to %q", s, got)
		}
	})
}
