package main

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The OAuth tests run a real authorization server, interop/.bin/idp, built
// from the separate module interop/idp (github.com/zitadel/oidc/v3) by
// interop/setup.sh. See interop/idp/main.go for its flags and endpoints.

// idpClient is a client registered at the IdP (its -client flag).
type idpClient struct {
	ID, Secret string
	// Scopes are what client_credentials may ask for, and gets when it asks
	// for none.
	Scopes []string
}

// idpOptions configures startIDP; the zero value is an IdP with no clients
// and no default audience.
type idpOptions struct {
	Clients []idpClient
	// Audience is the aud of a token whose request names no resource (the
	// -audience flag); empty: the requesting client's id.
	Audience string
	// TokenTTL is the lifetime of issued tokens; zero: the IdP's default (1h).
	TokenTTL time.Duration
	// DropOldKeys makes a Rotate that does not say keep the previous keys out
	// of the JWKS (-keep-old-keys=false).
	DropOldKeys bool
}

// idpUser asks for a user's access token (the IdP's test-only /test/token).
type idpUser struct {
	Sub    string
	Groups []string
	Scopes []string
	// Resources are the token's aud; none: the IdP's default audience.
	Resources []string
	// TTL, when non-zero, is the token's lifetime; negative gives a token
	// that has already expired.
	TTL time.Duration
	// Claims are further claims (roles, nested objects); they may not set
	// the registered ones (sub, aud, scope, groups, ...).
	Claims map[string]any
	// Opaque asks for an opaque token instead of a JWT: only introspection
	// (Introspect) reads it.
	Opaque bool
}

// idp is a running interop/.bin/idp.
type idp struct {
	t *testing.T
	// Issuer is http://127.0.0.1:PORT; discovery is at
	// Issuer+"/.well-known/openid-configuration", the JWKS at Issuer+"/keys",
	// the token endpoint at Issuer+"/oauth/token".
	Issuer string
	client *http.Client
}

// idpBinary returns interop/.bin/idp. Without it the test skips (fails
// under MCP_GATEWAY_TEST_PEERS=require), as interopDir does.
func idpBinary(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../../interop/.bin/idp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("MCP_GATEWAY_TEST_PEERS") == "require" {
			t.Fatalf("the test IdP is not built (interop/setup.sh): %v", err)
		}
		t.Skipf("the test IdP is not built: run ./test.sh, or interop/setup.sh, which builds it (%v)", err)
	}
	return bin
}

// startIDP runs the test IdP on a free loopback port and returns once it
// serves. Cleanup kills its process group.
func startIDP(t *testing.T, opts idpOptions) *idp {
	t.Helper()
	args := []string{"-port", "0"}
	for _, c := range opts.Clients {
		args = append(args, "-client", c.ID+":"+c.Secret+":"+strings.Join(c.Scopes, " "))
	}
	if opts.Audience != "" {
		args = append(args, "-audience", opts.Audience)
	}
	if opts.TokenTTL != 0 {
		args = append(args, "-token-ttl", opts.TokenTTL.String())
	}
	if opts.DropOldKeys {
		args = append(args, "-keep-old-keys=false")
	}
	cmd := exec.Command(idpBinary(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The IdP exits at stdin EOF: should this test binary die, so does it.
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	drained := make(chan struct{})
	lines := make(chan string, 1)
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		for sc.Scan() { // drain, so the child never blocks on stdout
		}
	}()
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-drained // all reads are done before Wait, as exec requires
		_ = cmd.Wait()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("idp stderr:\n%s", stderr.String())
		}
	})
	var line string
	select {
	case line = <-lines:
	case <-drained:
		t.Fatalf("idp exited before serving: %s", stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("idp did not print its issuer line")
	}
	var hello struct{ Issuer string }
	if err := json.Unmarshal([]byte(line), &hello); err != nil || !strings.HasPrefix(hello.Issuer, "http://127.0.0.1:") {
		t.Fatalf("idp issuer line %q: %v", line, err)
	}
	return &idp{t: t, Issuer: hello.Issuer, client: &http.Client{Transport: tr}}
}

// Post sends form to the IdP's path (with HTTP Basic client authentication
// when clientID is not empty) and returns the status and the JSON answer.
// It is the raw call; the methods below wrap it and fail the test unless a
// token comes back.
func (p *idp) Post(path string, form url.Values, clientID, secret string) (int, map[string]any) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.Issuer+path, strings.NewReader(form.Encode()))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if clientID != "" {
		// RFC 6749 section 2.3.1: form-encoded before Basic.
		req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	}
	return p.do(req)
}

// Get fetches the IdP's path and returns the status and the JSON answer.
func (p *idp) Get(path string) (int, map[string]any) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.Issuer+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.do(req)
}

func (p *idp) do(req *http.Request) (int, map[string]any) {
	p.t.Helper()
	resp, err := p.client.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		p.t.Fatalf("idp %s %s: %d, body not JSON: %v", req.Method, req.URL.Path, resp.StatusCode, err)
	}
	return resp.StatusCode, body
}

func (p *idp) token(path string, form url.Values, clientID, secret string) string {
	p.t.Helper()
	status, body := p.Post(path, form, clientID, secret)
	tok, _ := body["access_token"].(string)
	if status != http.StatusOK || tok == "" {
		p.t.Fatalf("idp POST %s: %d %v", path, status, body)
	}
	return tok
}

// ClientCredentials returns an access token for the client itself (sub =
// client id) with the given scopes (none: the client's configured scopes)
// and audience (resources, RFC 8707; none: the IdP's default audience).
func (p *idp) ClientCredentials(clientID, secret string, scopes []string, resources ...string) string {
	p.t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "resource": resources}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	return p.token("/oauth/token", form, clientID, secret)
}

// UserToken returns a user's access token, as if the user had logged in.
func (p *idp) UserToken(u idpUser) string {
	p.t.Helper()
	form := url.Values{"sub": {u.Sub}, "groups": u.Groups, "resource": u.Resources}
	if len(u.Scopes) > 0 {
		form.Set("scope", strings.Join(u.Scopes, " "))
	}
	if u.TTL != 0 {
		form.Set("expires_in", strconv.Itoa(int(u.TTL/time.Second)))
	}
	if u.Opaque {
		form.Set("format", "opaque")
	}
	if u.Claims != nil {
		c, err := json.Marshal(u.Claims)
		if err != nil {
			p.t.Fatal(err)
		}
		form.Set("claims", string(c))
	}
	return p.token("/test/token", form, "", "")
}

// Exchange performs RFC 8693 token exchange as the client: subjectToken (an
// access token from this IdP) for a token with the user's sub, the subject's
// groups, aud = resource (empty: the IdP's default audience) and the given
// scopes (none: the subject token's; more than it has is refused).
func (p *idp) Exchange(clientID, secret, subjectToken, resource string, scopes ...string) string {
	p.t.Helper()
	form := url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":      {subjectToken},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}
	if resource != "" {
		form.Set("resource", resource)
	}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	return p.token("/oauth/token", form, clientID, secret)
}

// Introspect asks the IdP about token (RFC 7662) as the client and returns
// the answer: {"active": false} for a token that is unknown, tampered with
// or expired; else active, iss, sub, aud, scope, client_id, exp, groups, ...
func (p *idp) Introspect(clientID, secret, token string) map[string]any {
	p.t.Helper()
	status, body := p.Post("/oauth/introspect", url.Values{"token": {token}}, clientID, secret)
	if status != http.StatusOK {
		p.t.Fatalf("idp introspect: %d %v", status, body)
	}
	return body
}

// Rotate makes a new signing key current and returns its kid; keepOld says
// whether the previous keys stay in the JWKS.
func (p *idp) Rotate(keepOld bool) string {
	p.t.Helper()
	status, body := p.Post("/test/rotate", url.Values{"keep_old": {strconv.FormatBool(keepOld)}}, "", "")
	kid, _ := body["kid"].(string)
	if status != http.StatusOK || kid == "" {
		p.t.Fatalf("idp rotate: %d %v", status, body)
	}
	return kid
}

// jwtParts decodes a compact JWS's header and claims, without verifying it.
func jwtParts(t *testing.T, token string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts, want 3", len(parts))
	}
	for i, dst := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatalf("token part %d: %v", i, err)
		}
		if err := json.Unmarshal(b, dst); err != nil {
			t.Fatalf("token part %d: %v", i, err)
		}
	}
	return header, claims
}

// verifyRS256 checks token's signature with the JWKS key its kid names, with
// the standard library only (the main module has no JOSE dependency), and
// returns its claims.
func verifyRS256(t *testing.T, jwks map[string]any, token string) map[string]any {
	t.Helper()
	header, claims := jwtParts(t, token)
	if header["alg"] != "RS256" {
		t.Fatalf("alg = %v, want RS256", header["alg"])
	}
	keys, _ := jwks["keys"].([]any)
	for _, k := range keys {
		k, _ := k.(map[string]any)
		if k["kid"] != header["kid"] {
			continue
		}
		n, errN := base64.RawURLEncoding.DecodeString(fmt.Sprint(k["n"]))
		e, errE := base64.RawURLEncoding.DecodeString(fmt.Sprint(k["e"]))
		if errN != nil || errE != nil || k["kty"] != "RSA" {
			t.Fatalf("JWKS key %v: kty %v, n %v, e %v", k["kid"], k["kty"], errN, errE)
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		i := strings.LastIndexByte(token, '.')
		sig, err := base64.RawURLEncoding.DecodeString(token[i+1:])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(token[:i]))
		if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
			t.Fatalf("signature: %v", err)
		}
		return claims
	}
	t.Fatalf("kid %v is not in the JWKS", header["kid"])
	return nil
}

// TestIDPIssuesTokens checks the test IdP the OAuth tests rely on: discovery,
// the JWKS, and the claims of each kind of token, verified against the JWKS.
func TestIDPIssuesTokens(t *testing.T) {
	const (
		gatewayURL  = "http://127.0.0.1:1/mcp"
		upstreamURL = "http://upstream.test/mcp"
	)
	p := startIDP(t, idpOptions{
		Clients:  []idpClient{{ID: "gateway", Secret: "s3cret", Scopes: []string{"upstream:read"}}},
		Audience: gatewayURL,
	})

	status, disc := p.Get("/.well-known/openid-configuration")
	if status != http.StatusOK || disc["issuer"] != p.Issuer || disc["jwks_uri"] != p.Issuer+"/keys" || disc["token_endpoint"] != p.Issuer+"/oauth/token" {
		t.Fatalf("discovery: %d %v", status, disc)
	}
	grants, _ := disc["grant_types_supported"].([]any)
	for _, g := range []any{"client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"} {
		if !slices.Contains(grants, g) {
			t.Errorf("grant_types_supported %v lacks %v", grants, g)
		}
	}
	status, jwks := p.Get("/keys")
	keys, _ := jwks["keys"].([]any)
	if status != http.StatusOK || len(keys) != 1 {
		t.Fatalf("JWKS: %d %v", status, jwks)
	}
	if k := keys[0].(map[string]any); k["d"] != nil || k["alg"] != "RS256" || k["use"] != "sig" {
		t.Errorf("JWKS key: %v", k)
	}

	check := func(name string, claims map[string]any, want map[string]any) {
		t.Helper()
		for k, w := range want {
			if got, _ := json.Marshal(claims[k]); string(got) != mustJSON(t, w) {
				t.Errorf("%s: %s = %s, want %s", name, k, got, mustJSON(t, w))
			}
		}
	}

	cc := verifyRS256(t, jwks, p.ClientCredentials("gateway", "s3cret", nil, upstreamURL))
	check("client credentials", cc, map[string]any{
		"iss": p.Issuer, "sub": "gateway", "aud": []string{upstreamURL}, "scope": "upstream:read",
	})

	user := p.UserToken(idpUser{Sub: "alice", Groups: []string{"eng"}, Scopes: []string{"tools:read", "tools:call"}})
	check("user token", verifyRS256(t, jwks, user), map[string]any{
		"iss": p.Issuer, "sub": "alice", "aud": []string{gatewayURL}, "scope": "tools:read tools:call", "groups": []string{"eng"},
	})

	exchanged := verifyRS256(t, jwks, p.Exchange("gateway", "s3cret", user, upstreamURL, "tools:call"))
	check("exchanged token", exchanged, map[string]any{
		"iss": p.Issuer, "sub": "alice", "aud": []string{upstreamURL}, "scope": "tools:call", "groups": []string{"eng"},
		"act": map[string]any{"sub": "gateway"},
	})

	opaque := p.UserToken(idpUser{Sub: "carol", Scopes: []string{"tools:read"}, Opaque: true})
	if strings.Count(opaque, ".") == 2 {
		t.Errorf("an opaque token looks like a JWT: %s", opaque)
	}
	check("introspected opaque token", p.Introspect("gateway", "s3cret", opaque), map[string]any{
		"active": true, "iss": p.Issuer, "sub": "carol", "aud": []string{gatewayURL}, "scope": "tools:read",
	})
	check("introspected garbage", p.Introspect("gateway", "s3cret", opaque+"x"), map[string]any{"active": false, "sub": nil})

	// A token the gateway must refuse for its lifetime is still signed right.
	expired := verifyRS256(t, jwks, p.UserToken(idpUser{Sub: "bob", TTL: -time.Minute}))
	if exp, _ := expired["exp"].(float64); time.Unix(int64(exp), 0).After(time.Now()) {
		t.Errorf("TTL -1m: exp %v is not in the past", exp)
	}

	oldHeader, _ := jwtParts(t, user)
	kid := p.Rotate(true)
	if kid == oldHeader["kid"] {
		t.Fatalf("rotation kept kid %v", kid)
	}
	_, jwks = p.Get("/keys")
	after := p.UserToken(idpUser{Sub: "alice"})
	if h, _ := jwtParts(t, after); h["kid"] != kid {
		t.Errorf("token after rotation has kid %v, want %v", h["kid"], kid)
	}
	verifyRS256(t, jwks, after)
	verifyRS256(t, jwks, user) // the old key is still published

	p.Rotate(false)
	_, jwks = p.Get("/keys")
	if keys, _ := jwks["keys"].([]any); len(keys) != 1 {
		t.Errorf("after Rotate(false) the JWKS has %d keys, want 1", len(keys))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
