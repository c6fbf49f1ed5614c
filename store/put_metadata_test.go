package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// The metadata bound is on what the commit record stores: encoding/json
// escapes <, > and & as 6 bytes each (red team round 23's x03: 65,000 '<'
// were accepted and made a 390 KB record).
func TestPutMetadataBoundAsStored(t *testing.T) {
	s, _ := newTestStore(t)
	k := []string{"meta"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	obj := func(v string) string { return `{"k":"` + v + `"}` } // 8 bytes around v
	for _, tc := range []struct {
		name string
		meta string
		ok   bool
	}{
		{"plain, at the bound", obj(strings.Repeat("a", maxPutMetadata-8)), true},
		{"plain, past the bound", obj(strings.Repeat("a", maxPutMetadata-7)), false},
		{"escaped, at the bound", obj(strings.Repeat("<", (maxPutMetadata-8)/6)), true},
		{"escaped past the bound, short as sent", obj(strings.Repeat("&", (maxPutMetadata-8)/6+1)), false},
		{"not JSON", `{"a":`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := s.Put(context.Background(), k, ids(1), PutOptions{Mode: ModeAppend, Metadata: []byte(tc.meta)})
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidArgument)) {
				t.Fatalf("metadata of %d bytes: %v", len(tc.meta), err)
			}
			if err == nil && len(rec.Metadata) > maxPutMetadata {
				t.Fatalf("the record keeps %d bytes of metadata", len(rec.Metadata))
			}
		})
	}
}
