package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// maxFormBytes bounds a request body; every request here is a small form.
const maxFormBytes = 64 << 10

// newHandler serves the OpenID Provider for issuer (discovery, JWKS, the token
// endpoint) and the test-only endpoints under /test/.
func newHandler(issuer string, s *storage) (http.Handler, error) {
	// The library encrypts opaque tokens with this key; we issue only JWTs, so
	// any fixed key does.
	cfg := &op.Config{
		CryptoKey:      sha256.Sum256([]byte("mcp-gateway interop idp")),
		AuthMethodPost: true,
	}
	provider, err := op.NewProvider(cfg, s, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		return nil, fmt.Errorf("idp: new provider: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", provider)
	mux.Handle(provider.TokenEndpoint().Relative(), tokenEndpoint(provider, s))
	mux.Handle("POST /test/token", userTokenEndpoint(provider, s))
	mux.Handle("POST /test/rotate", rotateEndpoint(s))
	return limitBody(mux), nil
}

func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		next.ServeHTTP(w, r)
	})
}

type resourcesKey struct{}

// resourcesFrom returns the RFC 8707 resource parameters of the token request
// that ctx belongs to.
func resourcesFrom(ctx context.Context) []string {
	r, _ := ctx.Value(resourcesKey{}).([]string)
	return r
}

// tokenEndpoint adds RFC 8707 resource indicators to the library's token
// endpoint. The library reads resource for token exchange but then takes the
// issued token's aud from audience alone, and does not read it at all for
// client_credentials; so we check each resource here and hand it on: as
// audience values for token exchange, through the context for
// client_credentials. A token exchange that names no target gets the default
// audience.
func tokenEndpoint(next http.Handler, s *storage) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			op.RequestError(w, r, oidc.ErrInvalidRequest().WithDescription("cannot parse the form: %v", err), nil)
			return
		}
		resources := r.PostForm["resource"]
		if err := checkResources(resources); err != nil {
			op.RequestError(w, r, err, nil)
			return
		}
		if r.PostForm.Get("grant_type") == string(oidc.GrantTypeTokenExchange) {
			// r.Form is what the library decodes (ParseForm does not run twice).
			aud := append(r.Form["audience"], resources...)
			if len(aud) == 0 && s.defaultAudience != "" {
				aud = []string{s.defaultAudience}
			}
			r.Form["audience"] = aud
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), resourcesKey{}, resources)))
	})
}

// checkResources applies RFC 8707 section 2: a resource is an absolute URI
// without a fragment.
func checkResources(resources []string) error {
	for _, res := range resources {
		u, err := url.Parse(res)
		if err != nil || !u.IsAbs() || u.Fragment != "" || strings.Contains(res, "#") {
			return oidc.ErrInvalidTarget().WithDescription("resource %q is not an absolute URI without a fragment", res)
		}
	}
	return nil
}

// registeredClaims are set by the provider and may not be given as extra
// claims of a test user token.
var registeredClaims = []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti", "client_id", "scope", "groups", "act", "azp", "auth_time"}

// userTokenEndpoint is POST /test/token, TEST-ONLY: it mints a user's access
// token without a login, for tests that need a host's token. Form fields:
//
//	sub         the user (required)
//	groups      a group; repeat for several (the groups claim, an array)
//	scope       space-separated scopes (the scope claim)
//	resource    the audience (RFC 8707); repeat for several; default: the
//	            -audience flag, else the client id
//	client_id   the client_id claim (default "test-user-agent")
//	expires_in  lifetime in seconds, may be zero or negative for an expired
//	            token (default: the -token-ttl flag)
//	claims      a JSON object of further claims (roles, a nested claim path);
//	            it may not set the claims above
//	format      jwt (default) or opaque: a token that only introspection
//	            (POST /oauth/introspect, RFC 7662, with a client's
//	            credentials) can read
//
// The answer is a token response: access_token, token_type, expires_in, scope.
func userTokenEndpoint(provider *op.Provider, s *storage) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, opaque, err := parseUserTokenRequest(r, s)
		if err != nil {
			op.RequestError(w, r, err, nil)
			return
		}
		ctx := op.ContextWithIssuer(r.Context(), provider.IssuerFromRequest(r))
		id, exp, err := s.CreateAccessToken(ctx, req)
		if err != nil {
			op.RequestError(w, r, err, nil)
			return
		}
		var token string
		if opaque {
			token, err = op.CreateBearerToken(id, req.subject, provider.Crypto())
		} else {
			token, err = op.CreateJWT(ctx, op.IssuerFromContext(ctx), req, exp, id, opClient{client{id: req.clientID}}, s)
		}
		if err != nil {
			op.RequestError(w, r, err, nil)
			return
		}
		writeJSON(w, http.StatusOK, oidc.AccessTokenResponse{
			AccessToken: token,
			TokenType:   oidc.BearerToken,
			ExpiresIn:   uint64(max(0, time.Until(exp).Round(time.Second).Seconds())),
			Scope:       req.scopes,
		})
	})
}

func parseUserTokenRequest(r *http.Request, s *storage) (req *tokenRequest, opaque bool, err error) {
	if err := r.ParseForm(); err != nil {
		return nil, false, oidc.ErrInvalidRequest().WithDescription("cannot parse the form: %v", err)
	}
	f := r.PostForm
	req = &tokenRequest{subject: f.Get("sub"), scopes: strings.Fields(f.Get("scope")), extra: map[string]any{}}
	if req.subject == "" {
		return nil, false, oidc.ErrInvalidRequest().WithDescription("sub is required")
	}
	if err := checkResources(f["resource"]); err != nil {
		return nil, false, err
	}
	req.audience = s.audience(f["resource"])
	if c := f.Get("claims"); c != "" {
		if err := json.Unmarshal([]byte(c), &req.extra); err != nil {
			return nil, false, oidc.ErrInvalidRequest().WithDescription("claims is not a JSON object: %v", err)
		}
		for _, k := range registeredClaims {
			if _, ok := req.extra[k]; ok {
				return nil, false, oidc.ErrInvalidRequest().WithDescription("claims may not set %q", k)
			}
		}
	}
	if groups := f["groups"]; len(groups) > 0 {
		req.extra["groups"] = groups
	}
	if e := f.Get("expires_in"); e != "" {
		n, err := strconv.ParseInt(e, 10, 32)
		if err != nil {
			return nil, false, oidc.ErrInvalidRequest().WithDescription("expires_in is not a whole number of seconds: %q", e)
		}
		req.ttl = time.Duration(n) * time.Second
		if req.ttl == 0 {
			// Zero means "the default" inside tokenRequest; a token that
			// expires now is one nanosecond in the past.
			req.ttl = -time.Nanosecond
		}
	}
	req.clientID = f.Get("client_id")
	if req.clientID == "" {
		req.clientID = "test-user-agent"
	}
	switch f.Get("format") {
	case "", "jwt":
	case "opaque":
		opaque = true
	default:
		return nil, false, oidc.ErrInvalidRequest().WithDescription("format must be jwt or opaque, not %q", f.Get("format"))
	}
	return req, opaque, nil
}

// rotateEndpoint is POST /test/rotate, TEST-ONLY: it makes a new signing key
// current. Form field keep_old ("true" or "false", default: the -keep-old-keys
// flag) says whether the previous keys stay in the JWKS. The answer is
// {"kid": "<the new key's id>"}.
func rotateEndpoint(s *storage) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			op.RequestError(w, r, oidc.ErrInvalidRequest().WithDescription("cannot parse the form: %v", err), nil)
			return
		}
		keepOld := s.keepOldKeys
		if v := r.PostForm.Get("keep_old"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				op.RequestError(w, r, oidc.ErrInvalidRequest().WithDescription("keep_old must be true or false, not %q", v), nil)
				return
			}
			keepOld = b
		}
		kid, err := s.rotate(keepOld)
		if err != nil {
			op.RequestError(w, r, err, nil)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"kid": kid})
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
