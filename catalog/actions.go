package catalog

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/quiverdb/quiver/store"
)

// Action types (DESIGN.md §3.1). Clients rely on these names.
const (
	ActionListVersions      = "list-versions"
	ActionVerify            = "verify"
	ActionLineage           = "lineage"
	ActionRemoveOldVersions = "remove-old-versions"
	ActionSweep             = "sweep"
	ActionBreakLock         = "break-lock"
	ActionCompact           = "compact"
	ActionSetSchemaPolicy   = "set-schema-policy"
)

// ActionTypes lists every action with a description, in the order
// ListActions answers them.
var ActionTypes = []*flight.ActionType{
	{Type: ActionListVersions, Description: `{"path"} → {"path","latest","versions":[{"version","files","rows","bytes","created"}]}`},
	{Type: ActionVerify, Description: `{"path"} | {"prefix"} | {}, optional "sample" (0,1] and "seed" → {"ok","checked_files","problems":[{"kind","path","detail"}]}`},
	{Type: ActionLineage, Description: `{"path"} → one result per commit record, oldest first`},
	{Type: ActionRemoveOldVersions, Description: `{"path","keep":1,"grace_s":3600} → {"removed":["v0"]}`},
	{Type: ActionSweep, Description: `{"older_than_s":3600} → {"removed":[…]}`},
	{Type: ActionBreakLock, Description: `{"path"} → {"broken":bool,"reason"}`},
	{Type: ActionCompact, Description: `{"path"} → the DoPut result of the new version`},
	{Type: ActionSetSchemaPolicy, Description: `{"path","schema_policy":"additive"|"none"} → {"path","schema_policy","set","writer"}`},
}

// Action is a parsed action body. Only the fields of its Type are set.
type Action struct {
	// Type is one of the Action* names.
	Type string
	// Keys name the profile (list-versions, lineage, remove-old-versions,
	// break-lock, compact, and verify with "path").
	Keys []string
	// Prefix limits verify to profiles under a key prefix; nil with no
	// Keys means the whole data dir.
	Prefix []string
	// Keep is how many newest versions remove-old-versions keeps (≥ 1).
	Keep int
	// Grace overrides the server's grace period (remove-old-versions);
	// nil means the server default.
	Grace *time.Duration
	// OlderThan overrides the age after which sweep removes temps; nil
	// means the server default.
	OlderThan *time.Duration
	// Sample (verify) is the fraction of files re-hashed, 0 < Sample <= 1;
	// 0 means all. Seed picks which: the same seed checks the same files.
	Sample float64
	Seed   int64
	// PublicKey (verify) requires every commit record to carry a valid
	// signature by this ed25519 key.
	PublicKey ed25519.PublicKey
	// SchemaPolicy (set-schema-policy) is store.PolicyAdditive or
	// store.PolicyNone.
	SchemaPolicy string
}

// Path is the slash-joined profile name, "" when the action has none.
func (a *Action) Path() string { return store.ProfilePath(a.Keys) }

type actionWire struct {
	Path       *string  `json:"path,omitempty"`
	Keys       []string `json:"keys,omitempty"`
	Prefix     *string  `json:"prefix,omitempty"`
	Keep       *int     `json:"keep,omitempty"`
	GraceS     *float64 `json:"grace_s,omitempty"`
	OlderThanS *float64 `json:"older_than_s,omitempty"`
	Sample     *float64 `json:"sample,omitempty"`
	Seed       *int64   `json:"seed,omitempty"`
	PublicKey  *string  `json:"public_key,omitempty"`
	Policy     *string  `json:"schema_policy,omitempty"`
}

// ParseAction parses the JSON body of an action. An empty body is {}.
// Fields an action does not take are rejected, so a typo does not widen an
// admin action's reach.
func ParseAction(typ string, body []byte) (*Action, error) {
	var allowed map[string]bool
	needPath := true
	switch typ {
	case ActionListVersions, ActionLineage, ActionBreakLock, ActionCompact:
		allowed = map[string]bool{"path": true}
	case ActionVerify:
		allowed = map[string]bool{"path": true, "prefix": true, "sample": true, "seed": true, "public_key": true}
		needPath = false
	case ActionRemoveOldVersions:
		allowed = map[string]bool{"path": true, "keep": true, "grace_s": true}
	case ActionSweep:
		allowed = map[string]bool{"older_than_s": true}
		needPath = false
	case ActionSetSchemaPolicy:
		allowed = map[string]bool{"path": true, "schema_policy": true}
	default:
		return nil, fmt.Errorf("%w: %q (see ListActions)", ErrUnknownAction, truncate(typ))
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		body = []byte("{}")
	}
	var w actionWire
	if err := decodeStrict(body, &w); err != nil {
		return nil, fmt.Errorf("%w: %s body is not a valid JSON object: %s", ErrInvalid, typ, jsonError(err))
	}
	given := map[string]bool{
		"path": w.Path != nil || w.Keys != nil, "prefix": w.Prefix != nil, "keep": w.Keep != nil,
		"grace_s": w.GraceS != nil, "older_than_s": w.OlderThanS != nil,
		"sample": w.Sample != nil, "seed": w.Seed != nil, "public_key": w.PublicKey != nil,
		"schema_policy": w.Policy != nil,
	}
	for f, ok := range given {
		if ok && !allowed[f] {
			return nil, fmt.Errorf("%w: %s takes no %q", ErrInvalid, typ, f)
		}
	}
	a := &Action{Type: typ}
	switch {
	case w.Path != nil && w.Keys != nil:
		return nil, fmt.Errorf("%w: %s body has both \"path\" and \"keys\"; give one", ErrInvalid, typ)
	case w.Path != nil:
		keys, err := store.ParseKeys(*w.Path)
		if err != nil {
			return nil, fmt.Errorf("%s path: %w", typ, err)
		}
		a.Keys = keys
	case w.Keys != nil:
		keys, err := store.ParseKeys(w.Keys...)
		if err != nil {
			return nil, fmt.Errorf("%s keys: %w", typ, err)
		}
		a.Keys = keys
	case needPath:
		return nil, fmt.Errorf("%w: %s needs \"path\"", ErrInvalid, typ)
	}
	if w.Prefix != nil {
		if a.Keys != nil {
			return nil, fmt.Errorf("%w: verify takes \"path\" or \"prefix\", not both", ErrInvalid)
		}
		prefix, err := ParsePrefix(*w.Prefix)
		if err != nil {
			return nil, fmt.Errorf("verify prefix: %w", err)
		}
		a.Prefix = prefix
	}
	if w.Sample != nil {
		if !(*w.Sample > 0 && *w.Sample <= 1) {
			return nil, fmt.Errorf("%w: sample must be in (0, 1]", ErrInvalid)
		}
		a.Sample = *w.Sample
	}
	if w.Seed != nil {
		a.Seed = *w.Seed
	}
	if w.PublicKey != nil {
		pub, err := store.ParsePublicKey([]byte(*w.PublicKey))
		if err != nil {
			return nil, fmt.Errorf("%w: verify public_key: %v", ErrInvalid, err)
		}
		a.PublicKey = pub
	}
	if typ == ActionRemoveOldVersions {
		a.Keep = DefaultKeep
		if w.Keep != nil {
			if *w.Keep < 1 {
				return nil, fmt.Errorf("%w: keep must be at least 1 (the latest version is never removed)", ErrInvalid)
			}
			a.Keep = *w.Keep
		}
	}
	if typ == ActionSetSchemaPolicy {
		if w.Policy == nil || (*w.Policy != store.PolicyAdditive && *w.Policy != store.PolicyNone) {
			got := "none given"
			if w.Policy != nil {
				got = fmt.Sprintf("%q", truncate(*w.Policy))
			}
			return nil, fmt.Errorf("%w: set-schema-policy needs \"schema_policy\": %q or %q (%s)", ErrInvalid, store.PolicyAdditive, store.PolicyNone, got)
		}
		a.SchemaPolicy = *w.Policy
	}
	var err error
	if a.Grace, err = seconds(w.GraceS, "grace_s"); err != nil {
		return nil, err
	}
	if a.OlderThan, err = seconds(w.OlderThanS, "older_than_s"); err != nil {
		return nil, err
	}
	return a, nil
}

func seconds(v *float64, name string) (*time.Duration, error) {
	if v == nil {
		return nil, nil
	}
	// Ten years is far beyond any useful grace period and keeps the
	// conversion clear of overflow.
	if math.IsNaN(*v) || *v < 0 || *v > 10*365*24*3600 {
		return nil, fmt.Errorf("%w: %s must be between 0 and 315360000 seconds", ErrInvalid, name)
	}
	d := time.Duration(*v * float64(time.Second))
	return &d, nil
}

// ParsePrefix parses a ListFlights criteria or verify prefix: "" (or "/")
// is every profile, otherwise keys matched component by component.
func ParsePrefix(s string) ([]string, error) {
	t := bytes.Trim([]byte(s), "/ \t\r\n")
	if len(t) == 0 {
		return nil, nil
	}
	keys, err := store.ParseKeys(string(t))
	if err != nil {
		return nil, fmt.Errorf("prefix: %w", err)
	}
	return keys, nil
}
