package flightserver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
)

// Role is what an identity may do; each role includes the ones below it.
type Role int

// The roles of docs/security.md.
const (
	// RoleNone may do nothing but list actions.
	RoleNone Role = iota
	// RoleRead may read data and metadata: DoGet, GetFlightInfo,
	// GetSchema, ListFlights, list-versions, lineage, verify.
	RoleRead
	// RoleWrite may also put (DoPut).
	RoleWrite
	// RoleAdmin may also change the store: remove-old-versions, sweep,
	// break-lock, compact.
	RoleAdmin
)

// String is the role's name in the auth file.
func (r Role) String() string {
	switch r {
	case RoleRead:
		return "read"
	case RoleWrite:
		return "write"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// ParseRole parses "read", "write" or "admin".
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "read":
		return RoleRead, nil
	case "write":
		return RoleWrite, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("role %q: want read, write or admin", s)
}

// Identity is who an RPC runs as.
type Identity struct {
	// Name is the user or token identity of the auth file, or
	// "anonymous@<peer>" when the server runs without auth. It is the
	// writer of every commit record the identity makes.
	Name string
	// Role is what the identity may do.
	Role Role
	// Prefixes limit the identity to profiles under these keys (matched
	// component by component); nil means every profile.
	Prefixes [][]string
	// Anonymous is set when the server runs without auth.
	Anonymous bool
}

// Unrestricted reports whether the identity may touch every profile.
func (id *Identity) Unrestricted() bool { return len(id.Prefixes) == 0 }

// Covers reports whether keys (a profile, or a key prefix) lie under one
// of the identity's prefixes.
func (id *Identity) Covers(keys []string) bool {
	if id.Unrestricted() {
		return true
	}
	for _, p := range id.Prefixes {
		if hasPrefix(keys, p) {
			return true
		}
	}
	return false
}

// Within narrows a key prefix to what the identity may see: the prefix
// itself if a prefix of the identity covers it, else the identity's
// prefixes that lie under it (none: nothing is visible).
func (id *Identity) Within(prefix []string) [][]string {
	if id.Covers(prefix) {
		return [][]string{prefix}
	}
	var out [][]string
	for _, p := range id.Prefixes {
		if hasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	return out
}

// hasPrefix reports whether keys begin with the components of prefix.
func hasPrefix(keys, prefix []string) bool {
	return len(keys) >= len(prefix) && slices.Equal(keys[:len(prefix)], prefix)
}

// AuthFile is the JSON document --auth-file names (docs/security.md).
// Secrets are stored hashed: passwords as bcrypt, tokens as the hex
// SHA-256 of the token.
type AuthFile struct {
	Users  []AuthUser  `json:"users"`
	Tokens []AuthToken `json:"tokens"`
}

// AuthUser is a user who logs in with the basic-auth handshake.
type AuthUser struct {
	Name           string   `json:"name"`
	PasswordBcrypt string   `json:"password_bcrypt"`
	Role           string   `json:"role"`
	Prefixes       []string `json:"prefixes,omitempty"`
}

// AuthToken is a static bearer token.
type AuthToken struct {
	// SHA256 is the hex SHA-256 of the token (never the token itself).
	SHA256   string   `json:"sha256"`
	Identity string   `json:"identity"`
	Role     string   `json:"role"`
	Prefixes []string `json:"prefixes,omitempty"`
	// Expires, when set, is the instant after which the token is refused.
	Expires *time.Time `json:"expires,omitempty"`
}

// authDB is one loaded auth file; it is replaced whole on reload.
type authDB struct {
	users  map[string]*authUser
	tokens map[string]*authToken // by hex SHA-256
}

type authUser struct {
	hash []byte
	id   Identity
}

type authToken struct {
	expires time.Time // zero: never
	id      Identity
}

// ParseAuthFile parses and checks an auth file.
func ParseAuthFile(b []byte) (*AuthFile, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f AuthFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	if _, err := compileAuth(&f); err != nil {
		return nil, err
	}
	return &f, nil
}

func compileAuth(f *AuthFile) (*authDB, error) {
	db := &authDB{users: map[string]*authUser{}, tokens: map[string]*authToken{}}
	for i, u := range f.Users {
		if u.Name == "" || strings.ContainsAny(u.Name, ":\n") {
			return nil, fmt.Errorf("auth file: user %d: name %q must be non-empty without ':'", i, u.Name)
		}
		if _, dup := db.users[u.Name]; dup {
			return nil, fmt.Errorf("auth file: user %q twice", u.Name)
		}
		if _, err := bcrypt.Cost([]byte(u.PasswordBcrypt)); err != nil {
			return nil, fmt.Errorf("auth file: user %q: password_bcrypt: %w", u.Name, err)
		}
		id, err := compileIdentity(u.Name, u.Role, u.Prefixes)
		if err != nil {
			return nil, fmt.Errorf("auth file: user %q: %w", u.Name, err)
		}
		db.users[u.Name] = &authUser{hash: []byte(u.PasswordBcrypt), id: id}
	}
	for i, t := range f.Tokens {
		h := strings.ToLower(strings.TrimSpace(t.SHA256))
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("auth file: token %d (%s): sha256 must be 64 hex digits", i, t.Identity)
		}
		if t.Identity == "" {
			return nil, fmt.Errorf("auth file: token %d: identity is empty", i)
		}
		if _, dup := db.tokens[h]; dup {
			return nil, fmt.Errorf("auth file: token %d (%s): the same token twice", i, t.Identity)
		}
		id, err := compileIdentity(t.Identity, t.Role, t.Prefixes)
		if err != nil {
			return nil, fmt.Errorf("auth file: token %d (%s): %w", i, t.Identity, err)
		}
		at := &authToken{id: id}
		if t.Expires != nil {
			at.expires = *t.Expires
		}
		db.tokens[h] = at
	}
	return db, nil
}

func compileIdentity(name, role string, prefixes []string) (Identity, error) {
	r, err := ParseRole(role)
	if err != nil {
		return Identity{}, err
	}
	id := Identity{Name: name, Role: r}
	for _, p := range prefixes {
		keys, err := catalog.ParsePrefix(p)
		if err != nil {
			return Identity{}, err
		}
		if keys == nil {
			if p != "" {
				// "/" or blanks read as "everything" by accident (a
				// template whose variable was empty: "${team}/"); only
				// the documented forms grant every profile.
				return Identity{}, fmt.Errorf("prefix %q names no profile key; to allow every profile, leave \"prefixes\" out (or use \"\")", p)
			}
			// "" is every profile: no restriction at all.
			return Identity{Name: name, Role: r}, nil
		}
		id.Prefixes = append(id.Prefixes, keys)
	}
	// Drop prefixes covered by others, so narrowing never yields overlaps
	// (a verify would otherwise check a profile twice).
	var kept [][]string
	for i, p := range id.Prefixes {
		covered := false
		for j, q := range id.Prefixes {
			if i != j && hasPrefix(p, q) && (len(q) < len(p) || j < i) {
				covered = true
				break
			}
		}
		if !covered {
			kept = append(kept, p)
		}
	}
	id.Prefixes = kept
	return id, nil
}

// Authenticator checks credentials against an auth file and hands out
// session tokens from the basic-auth handshake. It is safe for concurrent
// use; Reload swaps the file atomically.
type Authenticator struct {
	db       atomic.Pointer[authDB]
	path     string
	now      func() time.Time
	ttl      time.Duration
	cacheTTL time.Duration
	cacheKey [32]byte // HMAC key of the login cache, random per process
	mu       sync.Mutex
	sessions map[string]session    // by hex SHA-256 of the issued token
	logins   map[[32]byte]cachedOK // successful password checks, by HMAC of user and password
}

// cachedOK is a password check that succeeded: it stands while the user's
// hash in the auth file is still the one it was checked against.
type cachedOK struct {
	user    string
	hash    string
	expires time.Time
}

// session is a token the handshake issued to a user. The user's role and
// prefixes are looked up in the current auth file on every use, so a
// reload that removes or changes the user applies to its sessions at once.
type session struct {
	user    string
	hash    string // the user's password hash at login: a new password ends the session
	expires time.Time
}

// MaxSessionsPerUser is how many handshake tokens one user may hold at
// once; a further handshake ends the user's oldest session.
const MaxSessionsPerUser = 1024

// DefaultSessionTTL is how long a token from the basic-auth handshake is
// valid.
const DefaultSessionTTL = 12 * time.Hour

// DefaultLoginCacheTTL is how long a successful password check is
// remembered: a handshake with the same user and password within it skips
// bcrypt (and the password limits). A reload of the auth file forgets
// every entry.
const DefaultLoginCacheTTL = time.Minute

// AuthOption configures an Authenticator.
type AuthOption func(*Authenticator)

// WithAuthClock replaces time.Now, for tests of expiry.
func WithAuthClock(now func() time.Time) AuthOption { return func(a *Authenticator) { a.now = now } }

// WithSessionTTL sets how long a handshake token is valid (default
// DefaultSessionTTL).
func WithSessionTTL(d time.Duration) AuthOption { return func(a *Authenticator) { a.ttl = d } }

// WithLoginCacheTTL sets how long a successful password check is
// remembered (default DefaultLoginCacheTTL; 0: not at all).
func WithLoginCacheTTL(d time.Duration) AuthOption { return func(a *Authenticator) { a.cacheTTL = d } }

func newAuthenticator(path string, opts []AuthOption) *Authenticator {
	a := &Authenticator{path: path, now: time.Now, ttl: DefaultSessionTTL, cacheTTL: DefaultLoginCacheTTL,
		sessions: map[string]session{}, logins: map[[32]byte]cachedOK{}}
	if _, err := rand.Read(a.cacheKey[:]); err != nil {
		a.cacheTTL = 0 // no key, no cache
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// LoadAuthenticator reads the auth file at path.
func LoadAuthenticator(path string, opts ...AuthOption) (*Authenticator, error) {
	a := newAuthenticator(path, opts)
	if err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// NewAuthenticator returns an Authenticator over an auth file already
// parsed (Reload then has no file to read and fails).
func NewAuthenticator(f *AuthFile, opts ...AuthOption) (*Authenticator, error) {
	a := newAuthenticator("", opts)
	db, err := compileAuth(f)
	if err != nil {
		return nil, err
	}
	a.db.Store(db)
	return a, nil
}

// Reload reads the auth file again and swaps it in whole. On error the
// current file stays in force.
func (a *Authenticator) Reload() error {
	if a.path == "" {
		return errors.New("auth: no auth file to reload")
	}
	b, err := os.ReadFile(a.path)
	if err != nil {
		return fmt.Errorf("read auth file: %w", err)
	}
	f, err := ParseAuthFile(b)
	if err != nil {
		return err
	}
	return a.Set(f)
}

// Set swaps in f (as Reload does after reading the file).
func (a *Authenticator) Set(f *AuthFile) error {
	db, err := compileAuth(f)
	if err != nil {
		return err
	}
	a.db.Store(db)
	// Sessions of users who are gone or whose password changed are
	// dropped now; the lookup checks
	// again, so a race with a concurrent login cannot resurrect one. The
	// login cache is forgotten whole.
	a.mu.Lock()
	clear(a.logins)
	for h, s := range a.sessions {
		if u, ok := db.users[s.user]; !ok || string(u.hash) != s.hash {
			delete(a.sessions, h)
		}
	}
	a.mu.Unlock()
	return nil
}

// Counts is how many users and tokens are loaded, for the start log.
func (a *Authenticator) Counts() (users, tokens int) {
	db := a.db.Load()
	return len(db.users), len(db.tokens)
}

// errUnauthenticated is what a client learns about any failed credential:
// never which part was wrong.
var errUnauthenticated = status.Error(codes.Unauthenticated, "invalid or expired credentials")

// Login checks a user's password and issues a session token. A check that
// succeeded within the login cache TTL is not repeated.
func (a *Authenticator) Login(user, password string) (string, *Identity, error) {
	if len(password) > maxPasswordBytes {
		// bcrypt reads only the first 72 bytes: a longer password would
		// let anything that shares them in.
		return "", nil, errUnauthenticated
	}
	db := a.db.Load()
	u, ok := db.users[user]
	if !ok {
		// Spend the time a real check would, so timing does not tell
		// which user names exist.
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(password))
		return "", nil, errUnauthenticated
	}
	if !a.cached(user, password) {
		if bcrypt.CompareHashAndPassword(u.hash, []byte(password)) != nil {
			return "", nil, errUnauthenticated
		}
		a.remember(user, password, u)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, status.Error(codes.Internal, "issue token")
	}
	tok := "qs_" + base64.RawURLEncoding.EncodeToString(raw[:])
	a.mu.Lock()
	now := a.now()
	var (
		mine   int
		oldest string
	)
	for h, s := range a.sessions { // expired sessions go at the next login
		switch {
		case !now.Before(s.expires):
			delete(a.sessions, h)
		case s.user == user:
			mine++
			if oldest == "" || s.expires.Before(a.sessions[oldest].expires) {
				oldest = h
			}
		}
	}
	if mine >= MaxSessionsPerUser {
		// Logins in a loop (cheap once the login cache holds the
		// password) may not grow the table without end: the user's
		// oldest session ends instead.
		delete(a.sessions, oldest)
	}
	a.sessions[tokenHash(tok)] = session{user: user, hash: string(u.hash), expires: now.Add(a.ttl)}
	a.mu.Unlock()
	id := u.id
	return tok, &id, nil
}

// loginKey is the login cache's key of a user and password: an HMAC under
// a random per-process key, so the cache never holds the password or an
// unsalted hash of it.
func (a *Authenticator) loginKey(user, password string) [32]byte {
	h := hmac.New(sha256.New, a.cacheKey[:])
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(password))
	var k [32]byte
	copy(k[:], h.Sum(nil))
	return k
}

// cached reports whether user and password passed a check within the
// login cache TTL, against the user's current hash.
func (a *Authenticator) cached(user, password string) bool {
	if a.cacheTTL <= 0 {
		return false
	}
	u, ok := a.db.Load().users[user]
	if !ok {
		return false
	}
	k := a.loginKey(user, password)
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.logins[k]
	if !ok {
		return false
	}
	if !a.now().Before(c.expires) || c.user != user || c.hash != string(u.hash) {
		delete(a.logins, k)
		return false
	}
	return true
}

func (a *Authenticator) remember(user, password string, u *authUser) {
	if a.cacheTTL <= 0 {
		return
	}
	k := a.loginKey(user, password)
	a.mu.Lock()
	now := a.now()
	for h, c := range a.logins { // expired entries go at the next success
		if !now.Before(c.expires) {
			delete(a.logins, h)
		}
	}
	a.logins[k] = cachedOK{user: user, hash: string(u.hash), expires: now.Add(a.cacheTTL)}
	a.mu.Unlock()
}

// maxPasswordBytes is as much of a password as bcrypt reads.
const maxPasswordBytes = 72

var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("quiver"), bcrypt.DefaultCost)

// Token resolves a bearer token: a static token of the auth file or a
// session token of the handshake.
func (a *Authenticator) Token(tok string) (*Identity, error) {
	if tok == "" {
		return nil, errUnauthenticated
	}
	h := tokenHash(tok)
	db := a.db.Load()
	now := a.now()
	if t, ok := db.tokens[h]; ok {
		if !t.expires.IsZero() && !now.Before(t.expires) {
			return nil, errUnauthenticated
		}
		id := t.id
		return &id, nil
	}
	a.mu.Lock()
	s, ok := a.sessions[h]
	a.mu.Unlock()
	if !ok || !now.Before(s.expires) {
		return nil, errUnauthenticated
	}
	u, ok := db.users[s.user]
	if !ok || string(u.hash) != s.hash {
		return nil, errUnauthenticated
	}
	id := u.id
	return &id, nil
}

// TokenSHA256 is the hex SHA-256 of a token, as the auth file stores it.
func TokenSHA256(tok string) string { return tokenHash(tok) }

func tokenHash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

type identityKey struct{}

// IdentityFrom returns the identity an RPC runs as (nil outside an
// authenticated RPC).
func IdentityFrom(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}

// authenticate finds the identity of an incoming RPC from its
// authorization header (or anonymous when the server runs without auth).
func (s *Server) authenticate(ctx context.Context) (*Identity, error) {
	scheme, cred := authHeader(ctx)
	a := s.opts.auth
	if a == nil {
		return &Identity{Name: "anonymous@" + peerHost(ctx), Role: RoleAdmin, Anonymous: true}, nil
	}
	if !strings.EqualFold(scheme, "Bearer") || cred == "" {
		if scheme == "" {
			return nil, status.Error(codes.Unauthenticated, "authentication required: send 'authorization: Bearer <token>' or log in with the basic-auth handshake")
		}
		return nil, status.Error(codes.Unauthenticated, "authentication required: only Bearer tokens are accepted outside the handshake")
	}
	return a.Token(cred)
}

// handshake answers the basic-auth handshake: it checks 'authorization:
// Basic base64(user:password)' and returns 'authorization: Bearer <token>'
// in the response headers (where pyarrow and arrow-go look for it).
func (s *Server) handshake(ctx context.Context, setHeader func(metadata.MD) error) (*Identity, error) {
	a := s.opts.auth
	scheme, cred := authHeader(ctx)
	if a == nil {
		// Without auth there is nothing to log in to; answer a token-less
		// success so clients that always log in still work.
		return s.authenticate(ctx)
	}
	if !strings.EqualFold(scheme, "Basic") {
		if strings.EqualFold(scheme, "Bearer") {
			return a.Token(cred) // a client checking its token
		}
		return nil, status.Error(codes.Unauthenticated, "handshake needs 'authorization: Basic base64(user:password)'")
	}
	raw, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(cred)
	}
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, "basic auth: bad base64")
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "basic auth: want user:password")
	}
	if !a.cached(user, pass) {
		done, err := s.pw.admit(ctx, peerIP(ctx))
		if err != nil {
			return nil, err
		}
		defer done()
	} else {
		s.metrics.pwCached.Inc()
	}
	tok, id, err := a.Login(user, pass)
	if err != nil {
		return nil, err
	}
	if err := setHeader(metadata.Pairs("authorization", "Bearer "+tok)); err != nil {
		return nil, status.Errorf(codes.Internal, "send token: %v", err)
	}
	return id, nil
}

func authHeader(ctx context.Context) (scheme, cred string) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return "", ""
	}
	scheme, cred, _ = strings.Cut(strings.TrimSpace(vals[0]), " ")
	return scheme, strings.TrimSpace(cred)
}

// peerIP is the client's IP address (without the port), the key of the
// per-client password check rate.
func peerIP(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "unknown"
	}
	host := p.Addr.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return host
}

// peerHost is the client's address without the port, or with the verified
// client certificate's subject under mTLS.
func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "unknown"
	}
	host := p.Addr.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
		if cn := ti.State.VerifiedChains[0][0].Subject.CommonName; cn != "" {
			return host + " (cert " + cn + ")"
		}
	}
	return host
}
