package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const (
	gatewayURL  = "http://gateway.test/mcp"
	upstreamURL = "http://upstream.test/mcp"
)

// testIDP runs the real command (run) on a real socket, as the gateway's
// tests run the binary.
type testIDP struct {
	t      *testing.T
	issuer string
	client *http.Client
}

// startIDP runs run(args) and stops it, by closing its stdin, at cleanup;
// cleanup fails the test if run does not return nil.
func startIDP(t *testing.T, args ...string) *testIDP {
	t.Helper()
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(args, stdinR, stdoutW)
		stdoutW.CloseWithError(errors.New("idp exited"))
		done <- err
	}()
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		stdinW.Close()
		if err := <-done; err != nil {
			t.Errorf("idp: %v", err)
		}
	})
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the issuer line: %v (run: %v)", err, <-done)
	}
	// Drain the rest so run never blocks writing.
	go func() { _, _ = io.Copy(io.Discard, stdoutR) }()
	var hello struct{ Issuer string }
	if err := json.Unmarshal([]byte(line), &hello); err != nil || !strings.HasPrefix(hello.Issuer, "http://127.0.0.1:") {
		t.Fatalf("issuer line %q: %v", line, err)
	}
	return &testIDP{t: t, issuer: hello.Issuer, client: &http.Client{Transport: tr}}
}

// post sends a form and decodes the JSON answer into a map.
func (p *testIDP) post(path string, form url.Values, basicUser, basicPass string) (int, map[string]any) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.issuer+path, strings.NewReader(form.Encode()))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basicUser != "" {
		req.SetBasicAuth(url.QueryEscape(basicUser), url.QueryEscape(basicPass))
	}
	return p.do(req)
}

// postRaw sends a form without client credentials and returns only the
// status (the answer need not be JSON).
func (p *testIDP) postRaw(path string, form url.Values) (int, error) {
	p.t.Helper()
	resp, err := p.client.PostForm(p.issuer+path, form)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

func (p *testIDP) get(path string) (int, map[string]any) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.issuer+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.do(req)
}

func (p *testIDP) do(req *http.Request) (int, map[string]any) {
	p.t.Helper()
	resp, err := p.client.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		p.t.Fatalf("%s %s: %d, body not JSON: %v", req.Method, req.URL.Path, resp.StatusCode, err)
	}
	return resp.StatusCode, body
}

func (p *testIDP) jwks() jose.JSONWebKeySet {
	p.t.Helper()
	resp, err := p.client.Get(p.issuer + "/keys")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		p.t.Fatal(err)
	}
	return set
}

// token asks for a token and fails the test unless it gets one.
func (p *testIDP) token(path string, form url.Values, user, pass string) string {
	p.t.Helper()
	status, body := p.post(path, form, user, pass)
	tok, _ := body["access_token"].(string)
	if status != http.StatusOK || tok == "" {
		p.t.Fatalf("POST %s: %d %v", path, status, body)
	}
	if body["token_type"] != "Bearer" {
		p.t.Errorf("token_type = %v, want Bearer", body["token_type"])
	}
	return tok
}

type claims struct {
	jwt.Claims
	Scope    string         `json:"scope"`
	ClientID string         `json:"client_id"`
	Groups   []string       `json:"groups"`
	Act      map[string]any `json:"act"`
	Roles    []string       `json:"roles"`
}

// verify checks the token's RS256 signature against the current JWKS and its
// issuer and lifetime, and returns its claims and kid.
func (p *testIDP) verify(token string) (claims, string) {
	p.t.Helper()
	c, kid, err := p.verifyErr(token, time.Now())
	if err != nil {
		p.t.Fatal(err)
	}
	return c, kid
}

func (p *testIDP) verifyErr(token string, at time.Time) (claims, string, error) {
	p.t.Helper()
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return claims{}, "", err
	}
	kid := tok.Headers[0].KeyID
	set := p.jwks()
	keys := set.Key(kid)
	if len(keys) != 1 {
		return claims{}, kid, errors.New("kid " + kid + " is not in the JWKS")
	}
	var c claims
	if err := tok.Claims(keys[0].Key, &c); err != nil {
		return claims{}, kid, err
	}
	if err := c.Claims.ValidateWithLeeway(jwt.Expected{Issuer: p.issuer, Time: at}, 0); err != nil {
		return c, kid, err
	}
	return c, kid, nil
}

func TestDiscoveryAndJWKS(t *testing.T) {
	p := startIDP(t, "-client", "gw:s3cret")
	status, d := p.get("/.well-known/openid-configuration")
	if status != http.StatusOK {
		t.Fatalf("discovery: %d", status)
	}
	if d["issuer"] != p.issuer || d["jwks_uri"] != p.issuer+"/keys" || d["token_endpoint"] != p.issuer+"/oauth/token" {
		t.Errorf("discovery issuer/jwks_uri/token_endpoint = %v %v %v", d["issuer"], d["jwks_uri"], d["token_endpoint"])
	}
	grants, _ := d["grant_types_supported"].([]any)
	for _, g := range []string{"client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"} {
		if !slices.Contains(grants, any(g)) {
			t.Errorf("grant_types_supported %v lacks %s", grants, g)
		}
	}
	set := p.jwks()
	if len(set.Keys) != 1 {
		t.Fatalf("JWKS has %d keys, want 1", len(set.Keys))
	}
	k := set.Keys[0]
	if k.Algorithm != "RS256" || k.Use != "sig" || k.KeyID == "" || !k.IsPublic() {
		t.Errorf("JWKS key alg=%q use=%q kid=%q public=%v", k.Algorithm, k.Use, k.KeyID, k.IsPublic())
	}
}

func TestClientCredentials(t *testing.T) {
	p := startIDP(t, "-client", "gw:s3cret:read write", "-client", "other:pw", "-audience", gatewayURL)
	cc := func(extra url.Values) url.Values {
		f := url.Values{"grant_type": {"client_credentials"}}
		for k, v := range extra {
			f[k] = v
		}
		return f
	}
	for _, tc := range []struct {
		name      string
		form      url.Values
		wantAud   []string
		wantScope string
	}{
		{"resource is the audience", cc(url.Values{"resource": {upstreamURL}}), []string{upstreamURL}, "read write"},
		{"two resources", cc(url.Values{"resource": {upstreamURL, "http://b.test/"}}), []string{upstreamURL, "http://b.test/"}, "read write"},
		{"no resource: the default audience", cc(nil), []string{gatewayURL}, "read write"},
		{"narrower scope", cc(url.Values{"scope": {"read"}}), []string{gatewayURL}, "read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := p.verify(p.token("/oauth/token", tc.form, "gw", "s3cret"))
			if c.Subject != "gw" || c.ClientID != "gw" || c.Scope != tc.wantScope || !slices.Equal([]string(c.Audience), tc.wantAud) {
				t.Errorf("sub=%q client_id=%q scope=%q aud=%v, want gw gw %q %v", c.Subject, c.ClientID, c.Scope, c.Audience, tc.wantScope, tc.wantAud)
			}
		})
	}
	t.Run("client_secret_post", func(t *testing.T) {
		c, _ := p.verify(p.token("/oauth/token", cc(url.Values{"client_id": {"gw"}, "client_secret": {"s3cret"}}), "", ""))
		if c.Subject != "gw" {
			t.Errorf("sub = %q", c.Subject)
		}
	})
	for _, tc := range []struct {
		name       string
		form       url.Values
		user, pass string
		wantStatus int
		wantErr    string
	}{
		{"wrong secret", cc(nil), "gw", "nope", http.StatusUnauthorized, "invalid_client"},
		{"unknown client", cc(nil), "who", "s3cret", http.StatusUnauthorized, "invalid_client"},
		{"scope not allowed", cc(url.Values{"scope": {"admin"}}), "gw", "s3cret", http.StatusBadRequest, "invalid_scope"},
		{"client without scopes asks for one", cc(url.Values{"scope": {"read"}}), "other", "pw", http.StatusBadRequest, "invalid_scope"},
		{"relative resource", cc(url.Values{"resource": {"/mcp"}}), "gw", "s3cret", http.StatusBadRequest, "invalid_target"},
		{"resource with a fragment", cc(url.Values{"resource": {upstreamURL + "#x"}}), "gw", "s3cret", http.StatusBadRequest, "invalid_target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := p.post("/oauth/token", tc.form, tc.user, tc.pass)
			if status != tc.wantStatus || body["error"] != tc.wantErr || body["access_token"] != nil {
				t.Errorf("got %d %v, want %d error=%s", status, body, tc.wantStatus, tc.wantErr)
			}
		})
	}
}

func TestUserToken(t *testing.T) {
	p := startIDP(t, "-audience", gatewayURL)
	tok := p.token("/test/token", url.Values{
		"sub": {"alice"}, "groups": {"eng", "ops"}, "scope": {"tools:read tools:call"},
		"resource": {upstreamURL}, "claims": {`{"roles":["admin"],"org":{"team":"x"}}`},
	}, "", "")
	c, _ := p.verify(tok)
	if c.Subject != "alice" || c.Scope != "tools:read tools:call" || !slices.Equal([]string(c.Audience), []string{upstreamURL}) ||
		!slices.Equal(c.Groups, []string{"eng", "ops"}) || !slices.Equal(c.Roles, []string{"admin"}) {
		t.Errorf("claims = %+v", c)
	}

	c, _ = p.verify(p.token("/test/token", url.Values{"sub": {"bob"}}, "", ""))
	if !slices.Equal([]string(c.Audience), []string{gatewayURL}) || c.Groups != nil || c.Scope != "" {
		t.Errorf("default aud, no groups, no scope: got %+v", c)
	}

	for _, e := range []string{"-60", "0"} {
		expired := p.token("/test/token", url.Values{"sub": {"carol"}, "expires_in": {e}}, "", "")
		if _, _, err := p.verifyErr(expired, time.Now().Add(time.Second)); !errors.Is(err, jwt.ErrExpired) {
			t.Errorf("expires_in=%s: verify error %v, want expired", e, err)
		}
	}

	for _, tc := range []struct {
		name string
		form url.Values
	}{
		{"no sub", url.Values{"scope": {"x"}}},
		{"claims sets sub", url.Values{"sub": {"a"}, "claims": {`{"sub":"root"}`}}},
		{"claims sets aud", url.Values{"sub": {"a"}, "claims": {`{"aud":"x"}`}}},
		{"claims not an object", url.Values{"sub": {"a"}, "claims": {`[1]`}}},
		{"bad expires_in", url.Values{"sub": {"a"}, "expires_in": {"soon"}}},
		{"relative resource", url.Values{"sub": {"a"}, "resource": {"mcp"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := p.post("/test/token", tc.form, "", "")
			if status != http.StatusBadRequest || body["access_token"] != nil {
				t.Errorf("got %d %v, want 400", status, body)
			}
		})
	}
}

func TestTokenExchange(t *testing.T) {
	p := startIDP(t, "-client", "gw:s3cret")
	user := p.token("/test/token", url.Values{
		"sub": {"alice"}, "groups": {"eng"}, "scope": {"read write"}, "resource": {gatewayURL},
	}, "", "")
	te := func(extra url.Values) url.Values {
		f := url.Values{
			"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
			"subject_token":      {user},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
		}
		for k, v := range extra {
			f[k] = v
		}
		return f
	}
	for _, tc := range []struct {
		name      string
		form      url.Values
		wantAud   []string
		wantScope string
	}{
		{"resource", te(url.Values{"resource": {upstreamURL}}), []string{upstreamURL}, "read write"},
		{"audience", te(url.Values{"audience": {"upstream-a"}}), []string{"upstream-a"}, "read write"},
		{"narrowed scope", te(url.Values{"resource": {upstreamURL}, "scope": {"read"}}), []string{upstreamURL}, "read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := p.post("/oauth/token", tc.form, "gw", "s3cret")
			if status != http.StatusOK || body["issued_token_type"] != "urn:ietf:params:oauth:token-type:access_token" {
				t.Fatalf("got %d %v", status, body)
			}
			c, _ := p.verify(body["access_token"].(string))
			if c.Subject != "alice" || !slices.Equal([]string(c.Audience), tc.wantAud) || c.Scope != tc.wantScope ||
				!slices.Equal(c.Groups, []string{"eng"}) || c.ClientID != "gw" || c.Act["sub"] != "gw" {
				t.Errorf("claims = %+v, want sub alice aud %v scope %q groups [eng] client_id gw act.sub gw", c, tc.wantAud, tc.wantScope)
			}
		})
	}

	expired := p.token("/test/token", url.Values{"sub": {"alice"}, "expires_in": {"-60"}}, "", "")
	parts := strings.Split(user, ".")
	tampered := parts[0] + "." + parts[1] + "x." + parts[2]
	for _, tc := range []struct {
		name       string
		form       url.Values
		user, pass string
		wantStatus int
		wantErr    string
	}{
		{"no target and no default audience", te(nil), "gw", "s3cret", http.StatusBadRequest, "invalid_target"},
		{"wider scope", te(url.Values{"resource": {upstreamURL}, "scope": {"read admin"}}), "gw", "s3cret", http.StatusBadRequest, "invalid_scope"},
		{"expired subject token", te(url.Values{"resource": {upstreamURL}, "subject_token": {expired}}), "gw", "s3cret", http.StatusBadRequest, "invalid_request"},
		{"tampered subject token", te(url.Values{"resource": {upstreamURL}, "subject_token": {tampered}}), "gw", "s3cret", http.StatusBadRequest, "invalid_request"},
		{"id token type", te(url.Values{"resource": {upstreamURL}, "subject_token_type": {"urn:ietf:params:oauth:token-type:id_token"}}), "gw", "s3cret", http.StatusBadRequest, "invalid_request"},
		{"wrong client secret", te(url.Values{"resource": {upstreamURL}}), "gw", "nope", http.StatusUnauthorized, "invalid_client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := p.post("/oauth/token", tc.form, tc.user, tc.pass)
			if status != tc.wantStatus || body["error"] != tc.wantErr || body["access_token"] != nil {
				t.Errorf("got %d %v, want %d error=%s", status, body, tc.wantStatus, tc.wantErr)
			}
		})
	}
}

func TestTokenExchangeDefaultAudience(t *testing.T) {
	p := startIDP(t, "-client", "gw:s3cret", "-audience", upstreamURL)
	user := p.token("/test/token", url.Values{"sub": {"alice"}, "resource": {gatewayURL}}, "", "")
	c, _ := p.verify(p.token("/oauth/token", url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":      {user},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}, "gw", "s3cret"))
	if c.Subject != "alice" || !slices.Equal([]string(c.Audience), []string{upstreamURL}) {
		t.Errorf("sub=%q aud=%v, want alice [%s]", c.Subject, c.Audience, upstreamURL)
	}
}

func TestRotate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flags    []string
		form     url.Values
		keepsOld bool
	}{
		{"default keeps the old key", nil, nil, true},
		{"keep_old=false drops it", nil, url.Values{"keep_old": {"false"}}, false},
		{"-keep-old-keys=false drops it", []string{"-keep-old-keys=false"}, nil, false},
		{"keep_old=true overrides the flag", []string{"-keep-old-keys=false"}, url.Values{"keep_old": {"true"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startIDP(t, tc.flags...)
			before := p.token("/test/token", url.Values{"sub": {"alice"}}, "", "")
			_, oldKid := p.verify(before)

			status, body := p.post("/test/rotate", tc.form, "", "")
			newKid, _ := body["kid"].(string)
			if status != http.StatusOK || newKid == "" || newKid == oldKid {
				t.Fatalf("rotate: %d %v (old kid %s)", status, body, oldKid)
			}
			_, kid := p.verify(p.token("/test/token", url.Values{"sub": {"alice"}}, "", ""))
			if kid != newKid {
				t.Errorf("new token's kid = %s, want %s", kid, newKid)
			}
			_, _, err := p.verifyErr(before, time.Now())
			if tc.keepsOld && err != nil {
				t.Errorf("token signed before the rotation: %v, want it to verify", err)
			}
			if !tc.keepsOld && err == nil {
				t.Errorf("token signed before the rotation still verifies; its key should be gone from the JWKS")
			}
		})
	}
	t.Run("bad keep_old", func(t *testing.T) {
		p := startIDP(t)
		if status, body := p.post("/test/rotate", url.Values{"keep_old": {"maybe"}}, "", ""); status != http.StatusBadRequest {
			t.Errorf("got %d %v, want 400", status, body)
		}
	})
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-client", "nosecret"},
		{"-client", "id:"},
		{"-client", "a:x", "-client", "a:y"},
		{"-port", "70000"},
		{"-token-ttl", "0s"},
		{"-audience", "not-a-uri"},
		{"extra"},
	} {
		if err := run(args, strings.NewReader(""), io.Discard); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}

func TestIntrospection(t *testing.T) {
	p := startIDP(t, "-client", "gw:s3cret")
	user := url.Values{"sub": {"alice"}, "groups": {"eng"}, "scope": {"read write"}, "resource": {gatewayURL}}
	opaque := p.token("/test/token", withForm(user, url.Values{"format": {"opaque"}}), "", "")
	if strings.Count(opaque, ".") == 2 {
		t.Fatalf("format=opaque gave a JWT: %s", opaque)
	}
	jwtToken := p.token("/test/token", user, "", "")
	expired := p.token("/test/token", withForm(user, url.Values{"format": {"opaque"}, "expires_in": {"-60"}}), "", "")

	for _, tc := range []struct {
		name  string
		token string
	}{{"opaque", opaque}, {"jwt", jwtToken}} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := p.post("/oauth/introspect", url.Values{"token": {tc.token}}, "gw", "s3cret")
			groups, _ := body["groups"].([]any)
			aud, _ := body["aud"].([]any)
			if status != http.StatusOK || body["active"] != true || body["sub"] != "alice" || body["scope"] != "read write" ||
				body["iss"] != p.issuer || len(aud) != 1 || aud[0] != gatewayURL || len(groups) != 1 || groups[0] != "eng" {
				t.Errorf("introspection: %d %v", status, body)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		token string
	}{{"expired", expired}, {"unknown", "not-a-token"}, {"tampered", opaque + "x"}} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := p.post("/oauth/introspect", url.Values{"token": {tc.token}}, "gw", "s3cret")
			if status != http.StatusOK || body["active"] != false || body["sub"] != nil {
				t.Errorf("introspection: %d %v, want inactive", status, body)
			}
		})
	}
	t.Run("opaque subject token for exchange", func(t *testing.T) {
		status, body := p.post("/oauth/token", url.Values{
			"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
			"subject_token":      {opaque},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
			"resource":           {upstreamURL},
		}, "gw", "s3cret")
		if status != http.StatusOK {
			t.Fatalf("exchange: %d %v", status, body)
		}
		c, _ := p.verify(body["access_token"].(string))
		if c.Subject != "alice" || c.Scope != "read write" || !slices.Equal(c.Groups, []string{"eng"}) {
			t.Errorf("exchanged from an opaque token: %+v", c)
		}
	})
	t.Run("expired opaque subject token for exchange", func(t *testing.T) {
		status, body := p.post("/oauth/token", url.Values{
			"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
			"subject_token":      {expired},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
			"resource":           {upstreamURL},
		}, "gw", "s3cret")
		if status != http.StatusBadRequest || body["error"] != "invalid_request" {
			t.Errorf("got %d %v, want 400 invalid_request", status, body)
		}
	})
	t.Run("no client credentials", func(t *testing.T) {
		if status, _ := p.postRaw("/oauth/introspect", url.Values{"token": {opaque}}); status != http.StatusUnauthorized {
			t.Errorf("introspection without client credentials: %d, want 401", status)
		}
	})
	t.Run("bad format", func(t *testing.T) {
		if status, body := p.post("/test/token", withForm(user, url.Values{"format": {"paper"}}), "", ""); status != http.StatusBadRequest {
			t.Errorf("got %d %v, want 400", status, body)
		}
	})
}

func withForm(base, extra url.Values) url.Values {
	f := url.Values{}
	for k, v := range base {
		f[k] = v
	}
	for k, v := range extra {
		f[k] = v
	}
	return f
}
