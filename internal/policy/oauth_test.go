package policy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// testIdP is an issuer: OIDC discovery and a key set that a test can
// rotate, over a real socket.
type testIdP struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jose.JSONWebKey // public keys served
	fetches atomic.Int64      // key set requests
	// down makes discovery answer 503.
	down atomic.Bool
	// introspection is the discovery document's introspection_endpoint
	// (set before the first discovery); "" leaves it out.
	introspection string
}

func newTestIdP(t testing.TB) *testIdP {
	t.Helper()
	idp := &testIdP{}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		if idp.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		doc := map[string]string{"issuer": idp.srv.URL, "jwks_uri": idp.srv.URL + "/jwks"}
		if idp.introspection != "" {
			doc["introspection_endpoint"] = idp.introspection
		}
		_ = json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		idp.fetches.Add(1)
		idp.mu.Lock()
		defer idp.mu.Unlock()
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: idp.keys})
	})
	idp.srv = httptest.NewServer(mux)
	t.Cleanup(idp.srv.Close)
	return idp
}

// signer is a private key with its key id.
type signer struct {
	kid string
	alg jose.SignatureAlgorithm
	key any // *rsa.PrivateKey or *ecdsa.PrivateKey
}

func newRSA(t testing.TB, kid string) *signer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{kid: kid, alg: jose.RS256, key: k}
}

func newEC(t testing.TB, kid string) *signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{kid: kid, alg: jose.ES256, key: k}
}

func (s *signer) public() jose.JSONWebKey {
	var pub any
	switch k := s.key.(type) {
	case *rsa.PrivateKey:
		pub = &k.PublicKey
	case *ecdsa.PrivateKey:
		pub = &k.PublicKey
	}
	return jose.JSONWebKey{Key: pub, KeyID: s.kid, Algorithm: string(s.alg), Use: "sig"}
}

// publish serves these keys from now on.
func (idp *testIdP) publish(keys ...*signer) {
	idp.mu.Lock()
	defer idp.mu.Unlock()
	idp.keys = nil
	for _, k := range keys {
		idp.keys = append(idp.keys, k.public())
	}
}

// mint signs claims with s, its kid in the header.
func mint(t testing.TB, s *signer, claims map[string]any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: s.alg, Key: s.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", s.kid))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := sig.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fakeClock is the verifier's clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const testResource = "https://gw.example.com/mcp"

// oauthFixture is a verifier in front of one IdP, with a fake clock.
type oauthFixture struct {
	idp   *testIdP
	key   *signer
	o     *OAuth
	clock *fakeClock
}

func newOAuthFixture(t testing.TB, modify func(c *config.Config, idp *testIdP)) *oauthFixture {
	t.Helper()
	idp := newTestIdP(t)
	key := newRSA(t, "k1")
	idp.publish(key)
	c := config.Default()
	c.Auth.Mode = config.AuthOAuth
	c.Auth.OAuth.Resource = testResource
	c.Auth.OAuth.Issuers = []config.Issuer{{Issuer: idp.srv.URL, Audiences: []string{"gateway-client"}}}
	if modify != nil {
		modify(c, idp)
	}
	o, err := NewOAuth(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	o.now = clock.Now
	return &oauthFixture{idp: idp, key: key, o: o, clock: clock}
}

// claims returns valid claims for the fixture, with extra ones set.
func (f *oauthFixture) claims(extra map[string]any) map[string]any {
	now := f.clock.Now().Unix()
	c := map[string]any{"iss": f.idp.srv.URL, "sub": "alice", "aud": testResource, "exp": now + 300, "iat": now - 10, "nbf": now - 10}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func (f *oauthFixture) token(t testing.TB, extra map[string]any) string {
	return mint(t, f.key, f.claims(extra))
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestOAuthTokens(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t, nil)
	now := f.clock.Now().Unix()
	other := newRSA(t, "k1") // same kid, another key: a forger's
	valid := f.token(t, nil)
	parts := strings.Split(valid, ".")

	pubDER, _ := x509.MarshalPKIXPublicKey(&f.key.key.(*rsa.PrivateKey).PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hs := &signer{kid: "k1", alg: jose.HS256, key: pubPEM}

	tampered := f.claims(map[string]any{"sub": "mallory"})
	tp, _ := json.Marshal(tampered)

	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"valid, aud a string", valid, true},
		{"valid, aud a list", f.token(t, map[string]any{"aud": []string{"someone-else", testResource}}), true},
		{"valid, the issuer's extra audience", f.token(t, map[string]any{"aud": "gateway-client"}), true},
		{"expired", f.token(t, map[string]any{"exp": now - 61}), false},
		{"expired within the skew", f.token(t, map[string]any{"exp": now - 30}), true},
		{"no exp", f.token(t, map[string]any{"exp": nil}), false},
		{"exp not a number", f.token(t, map[string]any{"exp": "tomorrow"}), false},
		{"nbf in the future", f.token(t, map[string]any{"nbf": now + 61}), false},
		{"nbf within the skew", f.token(t, map[string]any{"nbf": now + 30}), true},
		{"iat in the future", f.token(t, map[string]any{"iat": now + 120}), false},
		{"wrong audience", f.token(t, map[string]any{"aud": "https://other.example.com/mcp"}), false},
		{"wrong audiences", f.token(t, map[string]any{"aud": []string{"a", "b"}}), false},
		{"no audience", f.token(t, map[string]any{"aud": nil}), false},
		{"unknown issuer", f.token(t, map[string]any{"iss": "https://evil.example.com"}), false},
		{"issuer with a trailing slash", f.token(t, map[string]any{"iss": f.idp.srv.URL + "/"}), false},
		{"signed by another key", mint(t, other, f.claims(nil)), false},
		{"no sub", f.token(t, map[string]any{"sub": nil}), false},
		{"alg none", b64(`{"alg":"none","typ":"JWT"}`) + "." + parts[1] + ".", false},
		{"alg none with a signature", b64(`{"alg":"none","kid":"k1"}`) + "." + parts[1] + "." + parts[2], false},
		{"HS256 keyed with the RSA public key", mint(t, hs, f.claims(nil)), false},
		{"tampered payload", parts[0] + "." + base64.RawURLEncoding.EncodeToString(tp) + "." + parts[2], false},
		{"not a JWT", "opaque-token-0123456789", false},
		{"JSON serialization", `{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := f.o.Identify(tt.token)
			if tt.ok {
				if err != nil {
					t.Fatalf("Identify: %v", err)
				}
				want := Identity{Key: "sub:alice@" + strings.TrimPrefix(f.idp.srv.URL, "http://"), ID: "oauth:" + f.idp.srv.URL + "#alice"}
				if id != want {
					t.Errorf("identity = %+v, want %+v", id, want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Identify accepted the token: %+v", id)
			}
			if !errors.Is(err, ErrInvalidCredentials) {
				t.Errorf("error %v is not ErrInvalidCredentials", err)
			}
			if strings.Contains(err.Error(), tt.token) || strings.Contains(err.Error(), parts[2]) {
				t.Errorf("error quotes the token: %v", err)
			}
			t.Logf("refused: %v", err)
		})
	}
	if _, err := f.o.Identify(""); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("empty token: %v, want ErrUnauthenticated", err)
	}
}

func TestOAuthAlgorithms(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t, func(c *config.Config, _ *testIdP) { c.Auth.OAuth.Issuers[0].Algorithms = []string{"ES256"} })
	ec := newEC(t, "ec1")
	f.idp.publish(f.key, ec)
	if _, err := f.o.Identify(mint(t, ec, f.claims(nil))); err != nil {
		t.Errorf("ES256 token: %v", err)
	}
	// RS256 is valid for the key but not allowed for the issuer.
	if _, err := f.o.Identify(f.token(t, nil)); err == nil {
		t.Errorf("an RS256 token was accepted from an ES256-only issuer")
	}
}

func TestOAuthKeyRotation(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t, nil)
	if _, err := f.o.Identify(f.token(t, nil)); err != nil {
		t.Fatal(err)
	}
	if n := f.idp.fetches.Load(); n != 1 {
		t.Fatalf("%d key fetches for the first token, want 1", n)
	}
	// Known keys are cached.
	for range 5 {
		if _, err := f.o.Identify(f.token(t, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.idp.fetches.Load(); n != 1 {
		t.Fatalf("%d key fetches for tokens of a known key, want 1", n)
	}
	// Forged tokens naming the known key fail without a fetch, so they
	// cannot use up the fetches a rotation needs.
	good := strings.Split(f.token(t, nil), ".")
	payload, _ := json.Marshal(f.claims(map[string]any{"sub": "mallory"}))
	forged := good[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + good[2]
	for range 5 {
		if _, err := f.o.Identify(forged); err == nil {
			t.Fatal("a forged token was accepted")
		}
	}
	if n := f.idp.fetches.Load(); n != 1 {
		t.Fatalf("%d key fetches after forged tokens of a known key, want 1", n)
	}

	// The issuer rotates to k2 right after the first fetch; a token of
	// k2 makes the gateway fetch the keys again at once (the first fetch
	// and one more pass without waiting).
	k2 := newRSA(t, "k2")
	f.idp.publish(k2)
	if _, err := f.o.Identify(mint(t, k2, f.claims(nil))); err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	if n := f.idp.fetches.Load(); n != 2 {
		t.Fatalf("%d key fetches after the rotation, want 2", n)
	}

	// Junk key ids: at most one fetch per interval, however many.
	junk := func(i int) string {
		return mint(t, &signer{kid: "junk" + string(rune('a'+i%26)), alg: jose.RS256, key: k2.key}, f.claims(nil))
	}
	for i := range 50 {
		if _, err := f.o.Identify(junk(i)); err == nil {
			t.Fatal("a token with an unknown kid was accepted")
		}
	}
	if n := f.idp.fetches.Load(); n != 2 {
		t.Fatalf("%d key fetches after junk kids within the interval, want 2", n)
	}
	f.clock.Advance(config.JWKSRefetchInterval)
	for i := range 50 {
		_, _ = f.o.Identify(junk(i))
	}
	if n := f.idp.fetches.Load(); n != 3 {
		t.Fatalf("%d key fetches after junk kids in the next interval, want 3", n)
	}
	// Tokens of the known key still pass while fetches are refused.
	if _, err := f.o.Identify(mint(t, k2, f.claims(nil))); err != nil {
		t.Fatalf("token of the current key during junk: %v", err)
	}
}

func TestOAuthDiscovery(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t, nil)
	f.idp.down.Store(true)
	_, err := f.o.Identify(f.token(t, nil))
	if !errors.Is(err, ErrInvalidCredentials) || !strings.Contains(err.Error(), "discovery") {
		t.Fatalf("issuer down: %v, want an invalid-credentials error naming discovery", err)
	}
	f.idp.down.Store(false)
	// Within the interval, the last failure stands, without a request.
	if _, err := f.o.Identify(f.token(t, nil)); err == nil {
		t.Fatal("discovery retried within the interval")
	}
	f.clock.Advance(config.JWKSRefetchInterval)
	if _, err := f.o.Identify(f.token(t, nil)); err != nil {
		t.Fatalf("after the issuer came back: %v", err)
	}

	// An explicit jwks_url needs no discovery.
	g := newOAuthFixture(t, func(c *config.Config, idp *testIdP) { c.Auth.OAuth.Issuers[0].JWKSURL = idp.srv.URL + "/jwks" })
	g.idp.down.Store(true)
	if _, err := g.o.Identify(g.token(t, nil)); err != nil {
		t.Fatalf("jwks_url with discovery down: %v", err)
	}
}

func TestOAuthTeams(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t, func(c *config.Config, _ *testIdP) {
		c.Teams = []config.Team{
			{Name: "keys", APIKeys: []string{"a-long-enough-key-123"}},
			{Name: "admins", Claims: map[string][]string{"groups": {"admin"}, "realm_access.roles": {"root"}}, ClaimsMatch: config.ClaimsAll},
			{Name: "data", Claims: map[string][]string{"groups": {"data-eng", "analysts"}, "realm_access.roles": {"data"}}},
			{Name: "ns", Claims: map[string][]string{"https://example.com/roles": {"ns"}}},
			{Name: "verified", Claims: map[string][]string{"email_verified": {"true"}, "level": {"3"}}},
		}
	})
	tests := []struct {
		name   string
		claims map[string]any
		team   string
	}{
		{"no claims: default view", nil, ""},
		{"array claim", map[string]any{"groups": []string{"x", "analysts"}}, "data"},
		{"string claim", map[string]any{"groups": "data-eng"}, "data"},
		{"nested path", map[string]any{"realm_access": map[string]any{"roles": []string{"data"}}}, "data"},
		{"all: one of two is not enough", map[string]any{"groups": []string{"admin"}}, ""},
		{"all: both", map[string]any{"groups": []string{"admin"}, "realm_access": map[string]any{"roles": []string{"root"}}}, "admins"},
		{"first match wins", map[string]any{"groups": []string{"admin", "analysts"}, "realm_access": map[string]any{"roles": []string{"root"}}}, "admins"},
		{"a claim named with dots", map[string]any{"https://example.com/roles": []string{"ns"}}, "ns"},
		{"boolean", map[string]any{"email_verified": true}, "verified"},
		{"number", map[string]any{"level": 3}, "verified"},
		{"a value of another type", map[string]any{"groups": map[string]any{"data-eng": true}}, ""},
		{"case matters", map[string]any{"groups": "Data-Eng"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := f.o.Identify(f.token(t, tt.claims))
			if err != nil {
				t.Fatal(err)
			}
			if id.Team != tt.team {
				t.Errorf("team = %q, want %q", id.Team, tt.team)
			}
			if team, ok := f.o.Team(id.ID); !ok || team != tt.team {
				t.Errorf("Team(%s) = %q, %v; want %q, true", id.ID, team, ok, tt.team)
			}
		})
	}
	// API keys are accepted beside tokens.
	id, err := f.o.Identify("a-long-enough-key-123")
	if err != nil || id.Team != "keys" || !strings.HasPrefix(id.ID, "key:") {
		t.Errorf("API key: %+v, %v", id, err)
	}
	if team, ok := f.o.Team(id.ID); !ok || team != "keys" {
		t.Errorf("Team of the key = %q, %v", team, ok)
	}
	if _, err := f.o.Identify("not-a-key-nor-a-token"); !errors.Is(err, ErrInvalidCredentials) {
		t.Errorf("unknown key: %v", err)
	}
	if _, ok := f.o.Team("oauth:https://nobody#x"); ok {
		t.Error("Team knows an identity it never saw")
	}
}

func TestOAuthUnmatchedDeny(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t, func(c *config.Config, _ *testIdP) {
		c.Auth.OAuth.Unmatched = config.UnmatchedDeny
		c.Teams = []config.Team{{Name: "data", Claims: map[string][]string{"groups": {"data-eng"}}}}
	})
	if _, err := f.o.Identify(f.token(t, nil)); !errors.Is(err, ErrNoTeam) {
		t.Errorf("no team: %v, want ErrNoTeam", err)
	}
	if id, err := f.o.Identify(f.token(t, map[string]any{"groups": "data-eng"})); err != nil || id.Team != "data" {
		t.Errorf("team: %+v, %v", id, err)
	}
}

func TestOAuthScopes(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t, func(c *config.Config, _ *testIdP) {
		c.Auth.OAuth.RequiredScopes = []string{"mcp:tools"}
		c.Teams = []config.Team{{Name: "admins", Claims: map[string][]string{"groups": {"admin"}}, Scopes: []string{"mcp:admin"}}}
	})
	tests := []struct {
		name   string
		claims map[string]any
		scope  string // the ScopeError's; "" for success
	}{
		{"scope string", map[string]any{"scope": "openid mcp:tools"}, ""},
		{"scp list", map[string]any{"scp": []string{"mcp:tools"}}, ""},
		{"scp string", map[string]any{"scp": "mcp:tools email"}, ""},
		{"none", nil, "mcp:tools"},
		{"another", map[string]any{"scope": "mcp:toolsx"}, "mcp:tools"},
		{"team scope missing", map[string]any{"scope": "mcp:tools", "groups": "admin"}, "mcp:tools mcp:admin"},
		{"team scope", map[string]any{"scope": "mcp:tools mcp:admin", "groups": "admin"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.o.Identify(f.token(t, tt.claims))
			if tt.scope == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var se *ScopeError
			if !errors.As(err, &se) {
				t.Fatalf("error %v, want a *ScopeError", err)
			}
			if se.Scope != tt.scope {
				t.Errorf("scope = %q, want %q", se.Scope, tt.scope)
			}
			if errors.Is(err, ErrInvalidCredentials) {
				t.Error("a scope error is also invalid credentials (401, not 403)")
			}
		})
	}
}

func TestLooksLikeJWT(t *testing.T) {
	t.Parallel()
	for tok, want := range map[string]bool{
		"a.b.c": true, "a.b.": true, "eyJ.eyJ.x-_": true,
		"a.b": false, "a.b.c.d": false, ".b.c": false, "a..c": false, "a.b.c=": false, "key with spaces": false, "": false,
	} {
		if got := LooksLikeJWT(tok); got != want {
			t.Errorf("LooksLikeJWT(%q) = %v, want %v", tok, got, want)
		}
	}
}

func TestCappedBody(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", maxKeySetBytes+10)))
	}))
	defer srv.Close()
	c := &http.Client{Transport: bounded{http.DefaultTransport}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	total := 0
	for {
		n, err := resp.Body.Read(buf)
		total += n
		if err != nil {
			if !strings.Contains(err.Error(), "larger than") {
				t.Fatalf("read error %v after %d bytes, want the cap's", err, total)
			}
			break
		}
	}
	if total > maxKeySetBytes+1 {
		t.Errorf("read %d bytes past a cap of %d", total, maxKeySetBytes)
	}
}

// BenchmarkIdentify compares a token's verification (an RS256 signature
// with cached keys, the claims) with an API key's lookup.
func BenchmarkIdentify(b *testing.B) {
	f := newOAuthFixture(b, func(c *config.Config, _ *testIdP) {
		c.Teams = []config.Team{{Name: "k", APIKeys: []string{"a-long-enough-key-123"}}, {Name: "d", Claims: map[string][]string{"groups": {"d"}}}}
	})
	tok := f.token(b, map[string]any{"groups": "d"})
	if _, err := f.o.Identify(tok); err != nil {
		b.Fatal(err)
	}
	b.Run("oauth", func(b *testing.B) {
		for b.Loop() {
			if _, err := f.o.Identify(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("api_key", func(b *testing.B) {
		for b.Loop() {
			if _, err := f.o.Identify("a-long-enough-key-123"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestOAuthAuditKeyNamesTheIssuer: two issuers on one host (a Keycloak's
// realms) give their users of the same sub distinct audit identities
// (Identity.Key), as they give them distinct IDs: the audit log must not
// show realm b's alice as realm a's.
func TestOAuthAuditKeyNamesTheIssuer(t *testing.T) {
	t.Parallel()
	var a, b string
	f := newOAuthFixture(t, func(c *config.Config, idp *testIdP) {
		a, b = idp.srv.URL+"/realms/a", idp.srv.URL+"/realms/b"
		c.Auth.OAuth.Issuers = []config.Issuer{{Issuer: a, JWKSURL: idp.srv.URL + "/jwks"}, {Issuer: b, JWKSURL: idp.srv.URL + "/jwks"}}
	})
	ida, err := f.o.Identify(f.token(t, map[string]any{"iss": a}))
	if err != nil {
		t.Fatal(err)
	}
	idb, err := f.o.Identify(f.token(t, map[string]any{"iss": b}))
	if err != nil {
		t.Fatal(err)
	}
	if ida.ID == idb.ID || ida.Key == idb.Key {
		t.Errorf("realm a's alice %+v and realm b's %+v share an identity", ida, idb)
	}
	if want := "sub:alice@" + strings.TrimPrefix(a, "http://"); ida.Key != want {
		t.Errorf("Key = %q, want %q", ida.Key, want)
	}
}

// TestOAuthProfileAudiences: a token for a profile's path (its URL,
// <resource>/<profile>, as its metadata names it) is accepted, and
// restricted to the paths its audience names; one for the gateway's
// resource, or an issuer's extra audience, is good on every path.
func TestOAuthProfileAudiences(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t, func(c *config.Config, _ *testIdP) {
		c.Profiles = []config.Profile{{Name: "coding"}, {Name: "chat"}}
	})
	for _, tc := range []struct {
		name     string
		aud      any
		audience string
		paths    map[string]bool
	}{
		{"the gateway's resource", testResource, "", map[string]bool{"": true, "coding": true, "chat": true}},
		{"one profile", testResource + "/coding", "coding ", map[string]bool{"": false, "coding": true, "chat": false}},
		{"two profiles", []string{testResource + "/coding", testResource + "/chat"}, "coding chat ", map[string]bool{"": false, "coding": true, "chat": true}},
		{"a profile and the resource", []string{testResource + "/coding", testResource}, "", map[string]bool{"": true, "chat": true}},
		{"a profile and the issuer's extra audience", []string{"gateway-client", testResource + "/coding"}, "", map[string]bool{"": true, "chat": true}},
		{"a profile and a foreign audience", []string{"https://other.example.com", testResource + "/chat"}, "chat ", map[string]bool{"": false, "chat": true, "coding": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := f.o.Identify(f.token(t, map[string]any{"aud": tc.aud}))
			if err != nil {
				t.Fatalf("Identify: %v", err)
			}
			if id.Audience != tc.audience {
				t.Errorf("Audience = %q, want %q", id.Audience, tc.audience)
			}
			for path, want := range tc.paths {
				if got := id.AllowsPath(path); got != want {
					t.Errorf("AllowsPath(%q) = %v, want %v", path, got, want)
				}
			}
		})
	}
	for _, aud := range []string{testResource + "/nope", testResource + "/", testResource + "/coding/x"} {
		if _, err := f.o.Identify(f.token(t, map[string]any{"aud": aud})); err == nil {
			t.Errorf("a token for %s was accepted", aud)
		}
	}
}

// TestOAuthProfileAudienceOfAnyResource: a profile's audience is the URL
// of its path, <scheme://host><endpoint>/<name>, as its metadata names
// it, whatever path auth.oauth.resource has; a URL under the resource's
// own path that is not the profile's path is no audience.
func TestOAuthProfileAudienceOfAnyResource(t *testing.T) {
	t.Parallel()
	for _, resource := range []string{"https://gw.example.com", "https://gw.example.com/", "https://gw.example.com/mcp/", "https://gw.example.com/api"} {
		t.Run(resource, func(t *testing.T) {
			f := newOAuthFixture(t, func(c *config.Config, _ *testIdP) {
				c.Auth.OAuth.Resource = resource
				c.Profiles = []config.Profile{{Name: "coding"}}
			})
			id, err := f.o.Identify(f.token(t, map[string]any{"aud": "https://gw.example.com/mcp/coding"}))
			if err != nil {
				t.Fatalf("a token for the profile's path: %v", err)
			}
			if id.Audience != "coding " || !id.AllowsPath("coding") || id.AllowsPath("") {
				t.Errorf("Audience = %q, want the profile's path only", id.Audience)
			}
			for _, aud := range []string{"https://gw.example.com/coding", "https://gw.example.com/api/coding"} {
				if _, err := f.o.Identify(f.token(t, map[string]any{"aud": aud})); err == nil {
					t.Errorf("a token for %s was accepted", aud)
				}
			}
		})
	}
}
