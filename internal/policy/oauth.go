package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/time/rate"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// ScopeError means a valid token does not grant the scopes its view
// needs: the server answers 403 insufficient_scope, naming Scope.
type ScopeError struct {
	// Scope lists the scopes needed, space-separated (RFC 6750 §3).
	Scope string
}

func (e *ScopeError) Error() string { return "the token lacks a needed scope (needs " + e.Scope + ")" }

// ErrNoTeam means a valid token matches no team's claims while
// auth.oauth.unmatched is deny: the server answers 403.
var ErrNoTeam = errors.New("the token matches no team")

// maxKeySetBytes bounds a discovery document or key set: a real one is a
// few kilobytes.
const maxKeySetBytes = 1 << 20

// maxKnown bounds the identities OAuth remembers the team of (for Team).
const maxKnown = 4096

// maxTokenBytes bounds a bearer credential: real access tokens, even JWTs
// with many groups, take a few kilobytes, and a longer one is refused
// before it is parsed or sent to an introspection endpoint.
const maxTokenBytes = 16 << 10

// OAuthOptions are the optional parts of NewOAuth.
type OAuthOptions struct {
	// Transport makes the requests to the issuers (discovery, keys); nil
	// means http.DefaultTransport. Each request is bounded by
	// config.OAuthFetchTimeout.
	Transport http.RoundTripper
	// Logger receives why discovery or a key fetch failed; nil discards.
	Logger *slog.Logger
}

// OAuth authenticates callers by OAuth 2.1 bearer access tokens, signed
// JWTs (auth.mode oauth), acting as a resource server: the signature is
// checked with the keys of the issuer the token names (and that issuer's
// only), against an algorithm allow-list; then exp, nbf and iat with the
// configured skew, aud, the team's claims and the scopes.
//
// An issuer's keys are fetched when a token first needs them (after OIDC
// discovery, without a jwks_url), so that an issuer that cannot be
// reached at start delays nothing but its own tokens; they are fetched
// again when a token names a key id the gateway has not seen (key
// rotation): the first fetch and one more at once, then at most one per
// config.JWKSRefetchInterval per issuer (fetchLimit).
type OAuth struct {
	keys     *APIKeys
	resource string
	// profiles maps the resource URL of each profile's path to the
	// profile's name (profileResources).
	profiles  map[string]string
	issuers   map[string]*issuer
	required  []string
	skew      time.Duration
	unmatched config.Unmatched
	teams     []claimTeam
	log       *slog.Logger
	// now is the clock of the checks and of the fetch limits (tests
	// replace it).
	now func() time.Time
	// introspecting are the issuers with introspection, in config order.
	introspecting []*issuer

	imu sync.Mutex // guards answers and pending
	// answers are the introspection answers, by the token's SHA-256.
	answers map[[32]byte]introspected
	pending map[[32]byte]*pendingIntrospection
	// slots bounds the introspections in flight
	// (config.IntrospectionConcurrency): one send per request asking.
	slots chan struct{}
	// onWait, when set (tests), is called by a request that waits for
	// the introspection another one is making.
	onWait func()
	// onQueue, when set (tests), is called by a request that waits for
	// a free introspection slot.
	onQueue func()

	mu sync.Mutex // guards known
	// known holds the team each identity was last given, for Team.
	known map[string]string
}

// claimTeam is a team as tokens select it.
type claimTeam struct {
	name   string
	claims map[string][]string
	all    bool
	scopes []string
}

// issuer is one accepted authorization server.
type issuer struct {
	iss       string
	jwksURL   string // "" until discovery names it
	audiences []string
	algs      []string
	client    *http.Client // discovery: bounded, not limited
	keyClient *http.Client // keys: bounded and rate-limited
	limit     *fetchLimit
	intro     *introspection // nil: the issuer's opaque tokens are refused

	mu sync.Mutex // guards the fields below
	// verifier checks signatures with the issuer's remote key set; nil
	// until the key set's URL is known.
	verifier *oidc.IDTokenVerifier
	// disc is the discovery document; nil until it was fetched.
	disc *discovery
	// tried is when discovery was last attempted, and lastErr why it
	// failed.
	tried   time.Time
	lastErr error
}

// discovery is what the gateway reads of an OIDC discovery document.
type discovery struct {
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// NewOAuth builds the verifier of cfg's auth.oauth and its teams' claims.
// The teams' api_keys, when any, are accepted too: a bearer credential is
// first compared with them, then, if it is a JWT, verified, else (an
// opaque token) introspected at the issuers that configured
// introspection; an API key is thus never sent to an issuer. It does not
// touch the network.
func NewOAuth(cfg *config.Config, opts *OAuthOptions) (*OAuth, error) {
	if opts == nil {
		opts = &OAuthOptions{}
	}
	oc := cfg.Auth.OAuth
	if oc.Resource == "" || len(oc.Issuers) == 0 {
		return nil, errors.New("auth mode oauth needs auth.oauth.resource and at least one issuer")
	}
	teamKeys := map[string][]string{}
	for _, t := range cfg.Teams {
		if len(t.APIKeys) > 0 {
			teamKeys[t.Name] = t.APIKeys
		}
	}
	var keys *APIKeys
	if len(teamKeys) > 0 {
		k, err := NewAPIKeys(teamKeys)
		if err != nil {
			return nil, err
		}
		keys = k
	}
	o := &OAuth{
		keys: keys, resource: oc.Resource, issuers: map[string]*issuer{},
		required: oc.RequiredScopes, skew: oc.ClockSkew, unmatched: oc.Unmatched,
		log: opts.Logger, now: time.Now, known: map[string]string{},
		answers: map[[32]byte]introspected{}, pending: map[[32]byte]*pendingIntrospection{},
		slots: make(chan struct{}, config.IntrospectionConcurrency),
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	o.profiles = map[string]string{}
	for _, p := range cfg.Profiles {
		if res := config.ProfileResource(oc.Resource, cfg.Endpoint, p.Name); res != "" {
			o.profiles[res] = p.Name
		}
	}
	rt := opts.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	for _, ic := range oc.Issuers {
		algs := ic.Algorithms
		if len(algs) == 0 {
			algs = config.DefaultAlgorithms
		}
		for _, a := range algs {
			if !slices.Contains(config.Algorithms, a) {
				return nil, fmt.Errorf("issuer %s: algorithm %q is not accepted", ic.Issuer, a)
			}
		}
		limit := &fetchLimit{next: rt, every: config.JWKSRefetchInterval, now: func() time.Time { return o.now() }}
		is := &issuer{
			iss: ic.Issuer, jwksURL: ic.JWKSURL, algs: algs, limit: limit,
			audiences: append(slices.Concat([]string{oc.Resource}, slices.Collect(maps.Keys(o.profiles))), ic.Audiences...),
			client:    &http.Client{Transport: bounded{rt}, Timeout: config.OAuthFetchTimeout},
			keyClient: &http.Client{Transport: limit, Timeout: config.OAuthFetchTimeout},
		}
		if is.jwksURL != "" {
			is.verifier = is.newVerifier(is.jwksURL, o.now)
		}
		if in := ic.Introspection; in != nil {
			is.intro = &introspection{
				url: in.URL, clientID: in.ClientID, secret: in.ClientSecret,
				// A redirect is not followed: a 307 would carry the token
				// (the body) and, to the same host name, the secret.
				client: &http.Client{Transport: bounded{rt}, Timeout: config.OAuthFetchTimeout,
					CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
			}
			o.introspecting = append(o.introspecting, is)
		}
		o.issuers[ic.Issuer] = is
	}
	for _, t := range cfg.Teams {
		if len(t.Claims) == 0 {
			continue
		}
		o.teams = append(o.teams, claimTeam{name: t.Name, claims: t.Claims, all: t.ClaimsMatch == config.ClaimsAll, scopes: t.Scopes})
	}
	return o, nil
}

// newVerifier returns the verifier of the key set at jwksURL. Only the
// signature, the algorithm and iss are go-oidc's to check: aud, exp, nbf
// and iat are checked by Identify, with the configured skew and
// audiences.
func (is *issuer) newVerifier(jwksURL string, now func() time.Time) *oidc.IDTokenVerifier {
	// The key set keeps this context for its fetches (its client), and
	// ignores its cancellation.
	keys := &keySet{url: jwksURL, client: is.keyClient}
	return oidc.NewVerifier(is.iss, keys, &oidc.Config{
		SkipClientIDCheck:    true,
		SkipExpiryCheck:      true,
		SupportedSigningAlgs: is.algs,
		Now:                  now,
	})
}

// verifierFor returns the issuer's verifier, running OIDC discovery
// first when no jwks_url was configured. A failed discovery is retried
// at most once per config.JWKSRefetchInterval; in between, tokens of the
// issuer fail at once with the last error.
func (is *issuer) verifierFor(ctx context.Context, now func() time.Time) (*oidc.IDTokenVerifier, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.verifier != nil {
		return is.verifier, nil
	}
	meta, err := is.discoverLocked(ctx, now)
	if err != nil {
		return nil, err
	}
	if meta.JWKSURI == "" {
		return nil, errors.New("the discovery document names no jwks_uri")
	}
	is.verifier = is.newVerifier(meta.JWKSURI, now)
	return is.verifier, nil
}

// discoverLocked returns the issuer's discovery document, fetching it
// the first time; is.mu is held. A failed discovery is retried at most
// once per config.JWKSRefetchInterval; in between, it fails at once with
// the last error.
func (is *issuer) discoverLocked(ctx context.Context, now func() time.Time) (*discovery, error) {
	if is.disc != nil {
		return is.disc, nil
	}
	if !is.tried.IsZero() && now().Sub(is.tried) < config.JWKSRefetchInterval {
		return nil, fmt.Errorf("discovery failed less than %s ago: %w", config.JWKSRefetchInterval, is.lastErr)
	}
	is.tried = now()
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, is.client), is.iss)
	if err != nil {
		is.lastErr = err
		return nil, fmt.Errorf("discovery: %w", err)
	}
	var meta discovery
	if err := p.Claims(&meta); err != nil {
		is.lastErr = fmt.Errorf("the discovery document: %v", err)
		return nil, is.lastErr
	}
	is.disc = &meta
	return is.disc, nil
}

// LooksLikeJWT reports whether a bearer credential has the shape of a
// JWS in compact form: three base64url parts, the first two not empty.
func LooksLikeJWT(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return false
	}
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Identify returns the identity of a bearer credential: a team's API
// key, or a valid access token. Its errors never quote the
// token. A valid token without the scopes its view needs gives a
// *ScopeError; one that matches no team under unmatched: deny,
// ErrNoTeam.
func (o *OAuth) Identify(token string) (Identity, error) {
	if token == "" {
		return Identity{}, ErrUnauthenticated
	}
	if o.keys != nil {
		if id, err := o.keys.Identify(token); err == nil {
			return id, nil
		}
	}
	if len(token) > maxTokenBytes {
		return Identity{}, fmt.Errorf("%w: the token is longer than %d bytes", ErrInvalidCredentials, maxTokenBytes)
	}
	jwt := LooksLikeJWT(token)
	if !jwt && len(o.introspecting) == 0 {
		if o.keys != nil {
			return Identity{}, ErrInvalidCredentials
		}
		return Identity{}, fmt.Errorf("%w: not a JWT", ErrInvalidCredentials)
	}
	ctx, cancel := context.WithTimeout(context.Background(), config.OAuthFetchTimeout)
	defer cancel()
	var id Identity
	var err error
	if jwt {
		id, err = o.verify(ctx, token)
	} else {
		id, err = o.introspect(ctx, token)
	}
	if err != nil {
		var se *ScopeError
		if errors.As(err, &se) || errors.Is(err, ErrNoTeam) {
			return Identity{}, err
		}
		return Identity{}, fmt.Errorf("%w: %v", ErrInvalidCredentials, err)
	}
	o.mu.Lock()
	if len(o.known) >= maxKnown {
		clear(o.known) // identities seen again are learnt again
	}
	o.known[id.ID] = id.Team
	o.mu.Unlock()
	return id, nil
}

// Team returns the team of an identity (Identity.ID): an API key's, or
// the team a token of that identity was last given by this verifier;
// false when it knows neither. A reload that keeps the verifier thus
// keeps the sessions of OAuth identities; one that replaces it ends
// them, and their hosts open new ones with their tokens.
func (o *OAuth) Team(id string) (string, bool) {
	if o.keys != nil {
		if t, ok := o.keys.Team(id); ok {
			return t, true
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.known[id]
	return t, ok
}

// claimSet is a token's payload, decoded once.
type claimSet map[string]any

func (o *OAuth) verify(ctx context.Context, token string) (Identity, error) {
	// The issuer is chosen by the unverified iss; the token is then
	// verified with that issuer's keys only.
	jws, err := jose.ParseSignedCompact(token, signatureAlgorithms())
	if err != nil {
		return Identity{}, fmt.Errorf("malformed token: %v", err)
	}
	var head struct {
		Iss string `json:"iss"`
	}
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &head); err != nil {
		return Identity{}, errors.New("malformed token: the payload is not a JSON object")
	}
	is, ok := o.issuers[head.Iss]
	if !ok {
		return Identity{}, fmt.Errorf("issuer %s is not accepted", quote(head.Iss))
	}
	v, err := is.verifierFor(ctx, o.now)
	if err != nil {
		o.log.Warn("oauth issuer unavailable", "issuer", is.iss, "err", err.Error())
		return Identity{}, fmt.Errorf("issuer %s: %v", is.iss, err)
	}
	tok, err := v.Verify(ctx, token)
	if err != nil {
		return Identity{}, err
	}
	var claims claimSet
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, errors.New("malformed token: the payload is not a JSON object")
	}
	return o.admit(is, claims, false)
}

// admit checks the claims of a token of issuer is (a verified JWT's, or
// an introspection answer's, when introspected) and returns its
// identity: times, aud, sub, then the team and its scopes. The two kinds
// of token get the same checks and the same identity, but for exp,
// which an introspection answer may leave out (RFC 7662 §2.2: active
// already says the token has not expired), and iss, which, when an
// answer has it, must be the issuer asked.
func (o *OAuth) admit(is *issuer, claims claimSet, introspected bool) (Identity, error) {
	if iss, ok := claims["iss"]; introspected && ok && iss != is.iss {
		return Identity{}, fmt.Errorf("the introspection answer of %s names another issuer", is.iss)
	}
	if err := o.checkTimes(claims, !introspected); err != nil {
		return Identity{}, err
	}
	aud := claims.audience()
	if !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(is.audiences, a) }) {
		return Identity{}, fmt.Errorf("audience %s is not this gateway's (%s)", quote(strings.Join(aud, " ")), o.resource)
	}
	sub, _ := claims["sub"].(string)
	if sub == "" {
		return Identity{}, errors.New("the token has no sub")
	}
	id := Identity{Key: "sub:" + sub + "@" + issuerName(is.iss), ID: "oauth:" + is.iss + "#" + sub, Audience: o.pathsOf(is, aud)}
	needed := o.required
	matched := false
	for _, t := range o.teams {
		if t.matches(claims) {
			id.Team, matched = t.name, true
			needed = union(o.required, t.scopes)
			break
		}
	}
	if !matched && o.unmatched == config.UnmatchedDeny {
		return Identity{}, ErrNoTeam
	}
	granted := claims.scopes()
	for _, s := range needed {
		if !slices.Contains(granted, s) {
			return Identity{}, &ScopeError{Scope: strings.Join(needed, " ")}
		}
	}
	return id, nil
}

// checkTimes checks exp (required when needExp), nbf and iat against the
// clock, each with the skew.
func (o *OAuth) checkTimes(c claimSet, needExp bool) error {
	now := o.now()
	exp, ok, err := c.time("exp")
	switch {
	case err != nil:
		return err
	case !ok && needExp:
		return errors.New("the token has no exp")
	case !ok:
		// An introspection answer without exp: its active stands for it.
	case !now.Before(exp.Add(o.skew)):
		return fmt.Errorf("the token expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if nbf, ok, err := c.time("nbf"); err != nil {
		return err
	} else if ok && now.Add(o.skew).Before(nbf) {
		return fmt.Errorf("the token is not valid before %s", nbf.UTC().Format(time.RFC3339))
	}
	if iat, ok, err := c.time("iat"); err != nil {
		return err
	} else if ok && now.Add(o.skew).Before(iat) {
		return fmt.Errorf("the token was issued in the future (%s)", iat.UTC().Format(time.RFC3339))
	}
	return nil
}

// time reads a NumericDate claim (RFC 7519 §2: seconds since the epoch).
func (c claimSet) time(name string) (time.Time, bool, error) {
	v, ok := c[name]
	if !ok || v == nil {
		return time.Time{}, false, nil
	}
	f, isNum := v.(float64)
	if !isNum || f < 0 || f > 1<<40 {
		return time.Time{}, false, fmt.Errorf("the token's %s is not a date in seconds", name)
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true, nil
}

// audience returns the token's aud: a string or a list of strings
// (RFC 7519 §4.1.3).
func (c claimSet) audience() []string {
	switch v := c["aud"].(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, item := range v {
			if s, ok := item.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// scopes returns the scopes a token grants: its scope claim, a
// space-separated string (RFC 8693 §4.2, RFC 9068), and its scp claim, a
// list or a string, as some issuers write it.
func (c claimSet) scopes() []string {
	var out []string
	for _, name := range []string{"scope", "scp"} {
		switch v := c[name].(type) {
		case string:
			out = append(out, strings.Fields(v)...)
		case []any:
			for _, item := range v {
				if s, ok := item.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// lookup returns the claim at path: the claim named path itself, else
// the path's dot-separated names followed through nested objects.
func (c claimSet) lookup(path string) (any, bool) {
	if v, ok := c[path]; ok {
		return v, true
	}
	var cur any = map[string]any(c)
	for name := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[name]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// matches reports whether a token's claims select the team.
func (t claimTeam) matches(c claimSet) bool {
	for _, name := range sortedClaims(t.claims) {
		v, ok := c.lookup(name)
		hit := ok && claimHas(v, t.claims[name])
		if hit && !t.all {
			return true
		}
		if !hit && t.all {
			return false
		}
	}
	return t.all
}

func sortedClaims(m map[string][]string) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// claimHas reports whether a claim's value is, or (a list) holds, one
// of values. Numbers and booleans compare as their JSON text.
func claimHas(v any, values []string) bool {
	switch v := v.(type) {
	case []any:
		return slices.ContainsFunc(v, func(item any) bool { return claimHas(item, values) })
	case string:
		return slices.Contains(values, v)
	case bool:
		return slices.Contains(values, strconv.FormatBool(v))
	case float64:
		return slices.Contains(values, strconv.FormatFloat(v, 'f', -1, 64))
	}
	return false
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// issuerName is iss without its scheme (the host and path), which the
// audit log names a token's subject by: the host alone would give the
// users of two issuers on one host (a Keycloak's realms) one name.
func issuerName(iss string) string {
	if u, err := url.Parse(iss); err == nil && u.Host != "" {
		return u.Host + strings.TrimSuffix(u.EscapedPath(), "/")
	}
	return iss
}

// quote quotes a value a token carries for an error message, cut to a
// length that keeps logs readable.
func quote(s string) string {
	if len(s) > 128 {
		s = s[:128] + "..."
	}
	return strconv.Quote(s)
}

// errRefetchTooSoon is the answer of a key fetch that comes too soon
// after the last one.
var errRefetchTooSoon = errors.New("the keys were fetched again less than " + config.JWKSRefetchInterval.String() + " ago")

// fetchLimit bounds the requests for an issuer's key set: the key set
// fetches again whenever a token names a key id it has not seen, which
// anyone can make up. It lets the first fetch and one more through at
// once (so that the first token of a key the issuer rotated to right
// after the gateway's first fetch passes), then one per interval.
type fetchLimit struct {
	next  http.RoundTripper
	every time.Duration
	now   func() time.Time

	once sync.Once
	lim  *rate.Limiter
}

func (l *fetchLimit) RoundTrip(r *http.Request) (*http.Response, error) {
	l.once.Do(func() { l.lim = rate.NewLimiter(rate.Every(l.every), 2) })
	if !l.lim.AllowN(l.now(), 1) {
		return nil, errRefetchTooSoon
	}
	return bounded{l.next}.RoundTrip(r)
}

// bounded caps the body of each response at maxKeySetBytes.
type bounded struct{ next http.RoundTripper }

func (b bounded) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &capped{rc: resp.Body, left: maxKeySetBytes}
	return resp, nil
}

// capped fails a read past its limit, where a LimitReader would end the
// body quietly and leave a truncated document to a confusing parse error.
type capped struct {
	rc   io.ReadCloser
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("response larger than %d bytes", maxKeySetBytes)
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, fmt.Errorf("response larger than %d bytes", maxKeySetBytes)
	}
	return n, err
}

func (c *capped) Close() error { return c.rc.Close() }

// keySet is an issuer's JSON Web Key Set, fetched with the issuer's
// rate-limited client (fetchLimit). Unlike go-oidc's RemoteKeySet, which
// fetches the keys again whenever a signature fails to verify, it
// fetches them again only for a key id it does not hold (the issuer
// rotated its key): a forged token that names a known key fails without
// costing a fetch, so it cannot use up the fetches a rotation needs.
type keySet struct {
	url    string
	client *http.Client

	fetchMu sync.Mutex // serialises fetches
	mu      sync.Mutex // guards keys
	keys    []jose.JSONWebKey
}

// VerifySignature implements oidc.KeySet.
func (k *keySet) VerifySignature(ctx context.Context, token string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(token, signatureAlgorithms())
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token must have exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys := k.current()
	if !holds(keys, kid) {
		if keys, err = k.refresh(ctx, kid); err != nil {
			return nil, fmt.Errorf("fetching the issuer's keys: %w", err)
		}
	}
	for _, key := range keys {
		if kid == "" || key.KeyID == kid {
			if payload, err := jws.Verify(&key); err == nil {
				return payload, nil
			}
		}
	}
	return nil, errors.New("the signature does not verify with the issuer's keys")
}

func (k *keySet) current() []jose.JSONWebKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys
}

// holds reports whether keys has one for kid (any key, for a token
// without a kid).
func holds(keys []jose.JSONWebKey, kid string) bool {
	return slices.ContainsFunc(keys, func(key jose.JSONWebKey) bool { return kid == "" || key.KeyID == kid })
}

// refresh fetches the keys, unless a fetch that ended while this one
// waited brought a key for kid.
func (k *keySet) refresh(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	if keys := k.current(); holds(keys, kid) {
		return keys, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", k.url, resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		return nil, fmt.Errorf("%s: %w", k.url, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = set.Keys
	return set.Keys, nil
}

// signatureAlgorithms are the algorithms a token may be parsed with; each
// issuer's verifier then accepts only its own allow-list of them.
func signatureAlgorithms() []jose.SignatureAlgorithm {
	algs := make([]jose.SignatureAlgorithm, len(config.Algorithms))
	for i, a := range config.Algorithms {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	return algs
}

// pathsOf returns the profiles a token of issuer is with audience aud
// is good for (Identity.Audience): "" when aud names the gateway's
// resource or one of the issuer's extra audiences, which are the whole
// gateway's; else the profiles whose paths' URLs it names, each
// followed by a space. A host on a profile's path asks for a token for
// that path's URL (its metadata names it), and such a token opens that
// path only: a token for a profile never reaches more than it.
func (o *OAuth) pathsOf(is *issuer, aud []string) string {
	var paths string
	for _, a := range aud {
		name, ok := o.profiles[a]
		switch {
		case ok:
			paths += name + " "
		case slices.Contains(is.audiences, a):
			return ""
		}
	}
	return paths
}
