package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// errUnsupported answers every part of op.Storage that this provider leaves
// out: it has no users who log in, no authorization codes, no refresh tokens
// and no sessions, only the token endpoint's machine grants.
var errUnsupported = errors.New("idp: not supported by this test provider")

// client is one configured OAuth client. Every client may use both
// client_credentials and token exchange; scopes bounds what client_credentials
// may ask for.
type client struct {
	id     string
	secret string
	scopes []string
}

// storage is the provider's whole state, in memory: the configured clients,
// the signing keys and the default audience. It implements op.Storage,
// op.ClientCredentialsStorage, op.TokenExchangeStorage and
// op.CanGetPrivateClaimsFromRequest.
type storage struct {
	clients         map[string]client
	defaultAudience string
	tokenTTL        time.Duration
	// keepOldKeys is what a rotation does with the previous keys when the
	// request does not say.
	keepOldKeys bool

	mu sync.Mutex // guards the fields below
	// keys are the published keys, oldest first; the last one signs.
	keys []*signingKey
	// tokens are the access tokens issued, by id (a JWT's jti, or the id an
	// opaque token encrypts), for introspection and for exchanging an
	// opaque token. Never pruned: an IdP lives for one test.
	tokens map[string]*issuedToken
}

// issuedToken is what introspection tells about a token.
type issuedToken struct {
	subject, clientID string
	audience, scopes  []string
	extra             map[string]any
	issuedAt, expires time.Time
}

// claims are the token's private claims as a JWT of it would carry them.
func (t *issuedToken) claims() map[string]any {
	c := map[string]any{}
	for k, v := range t.extra {
		c[k] = v
	}
	if len(t.scopes) > 0 {
		c["scope"] = strings.Join(t.scopes, " ")
	}
	return c
}

// issued returns the unexpired token with this id.
func (s *storage) issued(id string) (*issuedToken, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[id]
	if !ok || !time.Now().Before(t.expires) {
		return nil, false
	}
	return t, true
}

func newStorage(clients []client, defaultAudience string, tokenTTL time.Duration) (*storage, error) {
	s := &storage{
		clients:         make(map[string]client, len(clients)),
		defaultAudience: defaultAudience,
		tokenTTL:        tokenTTL,
		tokens:          map[string]*issuedToken{},
	}
	for _, c := range clients {
		s.clients[c.id] = c
	}
	if _, err := s.rotate(true); err != nil {
		return nil, err
	}
	return s, nil
}

// signingKey is an RS256 key; it serves both as op.SigningKey and op.Key.
type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (k *signingKey) Use() string                                 { return "sig" }
func (k *signingKey) ID() string                                  { return k.id }

// Key is the private key for signing. op.Key also calls Key, for the JWKS,
// which must only ever see the public half: publicKey wraps it for that.
func (k *signingKey) Key() any { return k.key }

type publicKey struct{ *signingKey }

func (k publicKey) Key() any { return &k.key.PublicKey }

// rotate makes a new key the signing key. With keepOld the previous keys stay
// in the JWKS (tokens they signed still verify); without it only the new key
// is published. It returns the new key's id.
func (s *storage) rotate(keepOld bool) (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", fmt.Errorf("idp: generate signing key: %w", err)
	}
	id, err := randomID()
	if err != nil {
		return "", err
	}
	k := &signingKey{id: id, key: key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if keepOld {
		s.keys = append(s.keys, k)
	} else {
		s.keys = []*signingKey{k}
	}
	return id, nil
}

func randomID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("idp: random id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[len(s.keys)-1], nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]op.Key, len(s.keys))
	for i, k := range s.keys {
		keys[i] = publicKey{k}
	}
	return keys, nil
}

// --- clients -----------------------------------------------------------------

func (s *storage) GetClientByClientID(_ context.Context, clientID string) (op.Client, error) {
	c, ok := s.clients[clientID]
	if !ok {
		return nil, fmt.Errorf("idp: unknown client %q", clientID)
	}
	return opClient{c}, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, clientID, clientSecret string) error {
	c, ok := s.clients[clientID]
	if !ok || c.secret != clientSecret {
		// One answer for both, like a real server: an unknown id and a wrong
		// secret must not be told apart.
		return errors.New("idp: invalid client id or secret")
	}
	return nil
}

func (s *storage) ClientCredentials(ctx context.Context, clientID, clientSecret string) (op.Client, error) {
	if err := s.AuthorizeClientIDSecret(ctx, clientID, clientSecret); err != nil {
		return nil, err
	}
	return opClient{s.clients[clientID]}, nil
}

// tokenRequest is what a client_credentials grant and the test-only user
// token endpoint turn into: who the token is about, for whom, with what.
type tokenRequest struct {
	subject  string
	clientID string
	audience []string
	scopes   []string
	// extra are private claims (groups and the like) put into the token.
	extra map[string]any
	// ttl, when non-zero, overrides the provider's token lifetime; it may be
	// negative, for an already expired token.
	ttl time.Duration
}

func (r *tokenRequest) GetSubject() string    { return r.subject }
func (r *tokenRequest) GetAudience() []string { return r.audience }
func (r *tokenRequest) GetScopes() []string   { return r.scopes }

func (s *storage) ClientCredentialsTokenRequest(ctx context.Context, clientID string, scopes []string) (op.TokenRequest, error) {
	c := s.clients[clientID]
	if len(scopes) == 0 {
		scopes = c.scopes
	}
	for _, sc := range scopes {
		if !slices.Contains(c.scopes, sc) {
			return nil, oidc.ErrInvalidScope().WithDescription("scope %q is not allowed for client %q", sc, clientID)
		}
	}
	return &tokenRequest{
		subject:  clientID,
		clientID: clientID,
		audience: s.audience(resourcesFrom(ctx)),
		scopes:   scopes,
	}, nil
}

// audience is the aud of a new token: the RFC 8707 resources asked for, else
// the default audience. Empty leaves it to the library, which then uses the
// client id.
func (s *storage) audience(resources []string) []string {
	if len(resources) > 0 {
		return resources
	}
	if s.defaultAudience != "" {
		return []string{s.defaultAudience}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	id, err := randomID()
	if err != nil {
		return "", time.Time{}, err
	}
	now := time.Now()
	t := &issuedToken{subject: r.GetSubject(), audience: r.GetAudience(), scopes: r.GetScopes(), issuedAt: now, expires: now.Add(s.tokenTTL)}
	switch r := r.(type) {
	case *tokenRequest:
		t.clientID, t.extra = r.clientID, r.extra
		if r.ttl != 0 {
			t.expires = now.Add(r.ttl)
		}
	case op.TokenExchangeRequest:
		t.clientID = r.GetClientID()
		t.extra, _ = s.GetPrivateClaimsFromTokenExchangeRequest(context.Background(), r)
		delete(t.extra, "scope")
	}
	s.mu.Lock()
	s.tokens[id] = t
	s.mu.Unlock()
	return id, t.expires, nil
}

// SetIntrospectionFromToken answers RFC 7662 introspection for a token this
// provider issued and that has not expired; an error makes the library
// answer {"active":false}.
func (s *storage) SetIntrospectionFromToken(ctx context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, _ string) error {
	t, ok := s.issued(tokenID)
	if !ok || t.subject != subject {
		return errors.New("idp: no such active token")
	}
	resp.Issuer = op.IssuerFromContext(ctx)
	resp.Subject = t.subject
	resp.ClientID = t.clientID
	resp.Audience = t.audience
	resp.Scope = t.scopes
	resp.TokenType = oidc.BearerToken
	resp.IssuedAt = oidc.FromTime(t.issuedAt)
	resp.NotBefore = oidc.FromTime(t.issuedAt)
	resp.Expiration = oidc.FromTime(t.expires)
	resp.JWTID = tokenID
	resp.Claims = t.extra
	return nil
}

// GetPrivateClaimsFromRequest puts scope (RFC 9068 section 2.2.3; the library
// does not) and the request's extra claims into a client_credentials or a
// test user token.
func (s *storage) GetPrivateClaimsFromRequest(_ context.Context, r op.TokenRequest, _ []string) (map[string]any, error) {
	claims := map[string]any{}
	if tr, ok := r.(*tokenRequest); ok {
		for k, v := range tr.extra {
			claims[k] = v
		}
	}
	if scopes := r.GetScopes(); len(scopes) > 0 {
		claims["scope"] = strings.Join(scopes, " ")
	}
	return claims, nil
}

// --- token exchange (RFC 8693) -------------------------------------------------

// ValidateTokenExchangeRequest accepts one profile: a subject_token that is an
// access token this provider issued (the library has already verified its
// signature, issuer and expiry), exchanged for an access token whose audience
// the request names (audience or resource, or the default audience). Scopes
// may narrow the subject token's, never widen them.
func (s *storage) ValidateTokenExchangeRequest(_ context.Context, r op.TokenExchangeRequest) error {
	if r.GetExchangeSubjectTokenType() != oidc.AccessTokenType {
		return oidc.ErrInvalidRequest().WithDescription("subject_token_type must be %s", oidc.AccessTokenType)
	}
	if r.GetExchangeActorTokenIDOrToken() != "" {
		return oidc.ErrInvalidRequest().WithDescription("actor_token is not supported")
	}
	switch r.GetRequestedTokenType() {
	case "":
		r.SetRequestedTokenType(oidc.AccessTokenType)
	case oidc.AccessTokenType:
	default:
		return oidc.ErrInvalidRequest().WithDescription("requested_token_type must be %s", oidc.AccessTokenType)
	}
	if len(r.GetAudience()) == 0 {
		return oidc.ErrInvalidTarget().WithDescription("name the upstream with audience or resource (no default audience is configured)")
	}
	subject, ok := s.subjectClaims(r)
	if !ok {
		return oidc.ErrInvalidRequest().WithDescription("subject_token is invalid")
	}
	have := subjectScopes(subject)
	want := r.GetScopes()
	if len(want) == 0 {
		want = have
	}
	for _, sc := range want {
		if !slices.Contains(have, sc) {
			return oidc.ErrInvalidScope().WithDescription("scope %q is not in the subject token", sc)
		}
	}
	r.SetCurrentScopes(want)
	return nil
}

// subjectClaims are the subject token's claims: the library decodes a JWT's;
// for an opaque token (which the library decrypts, but does not check the
// expiry of) they come from the token's record, which must be unexpired.
func (s *storage) subjectClaims(r op.TokenExchangeRequest) (map[string]any, bool) {
	if c := r.GetExchangeSubjectTokenClaims(); c != nil {
		return c, true
	}
	t, ok := s.issued(r.GetExchangeSubjectTokenIDOrToken())
	if !ok || t.subject != r.GetExchangeSubject() {
		return nil, false
	}
	return t.claims(), true
}

func subjectScopes(claims map[string]any) []string {
	s, _ := claims["scope"].(string)
	return strings.Fields(s)
}

func (s *storage) CreateTokenExchangeRequest(context.Context, op.TokenExchangeRequest) error {
	return nil
}

// exchangedClaims are the subject token's private claims that the exchanged
// token carries on.
var exchangedClaims = []string{"groups", "roles", "email", "name"}

// GetPrivateClaimsFromTokenExchangeRequest gives the exchanged token the
// subject's scope (as narrowed) and groups, and an act claim (RFC 8693 section
// 4.1) naming the client that made the exchange.
func (s *storage) GetPrivateClaimsFromTokenExchangeRequest(_ context.Context, r op.TokenExchangeRequest) (map[string]any, error) {
	claims := map[string]any{
		"act": map[string]any{"sub": r.GetClientID()},
	}
	subject, _ := s.subjectClaims(r)
	for _, k := range exchangedClaims {
		if v, ok := subject[k]; ok {
			claims[k] = v
		}
	}
	if scopes := r.GetScopes(); len(scopes) > 0 {
		claims["scope"] = strings.Join(scopes, " ")
	}
	return claims, nil
}

func (s *storage) SetUserinfoFromTokenExchangeRequest(context.Context, *oidc.UserInfo, op.TokenExchangeRequest) error {
	return errUnsupported
}

// --- the parts of op.Storage this provider does not offer ------------------------

func (s *storage) CreateAuthRequest(context.Context, *oidc.AuthRequest, string) (op.AuthRequest, error) {
	return nil, errUnsupported
}
func (s *storage) AuthRequestByID(context.Context, string) (op.AuthRequest, error) {
	return nil, errUnsupported
}
func (s *storage) AuthRequestByCode(context.Context, string) (op.AuthRequest, error) {
	return nil, errUnsupported
}
func (s *storage) SaveAuthCode(context.Context, string, string) error { return errUnsupported }
func (s *storage) DeleteAuthRequest(context.Context, string) error    { return errUnsupported }
func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errUnsupported
}
func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, errUnsupported
}
func (s *storage) TerminateSession(context.Context, string, string) error { return errUnsupported }
func (s *storage) RevokeToken(context.Context, string, string, string) *oidc.Error {
	return oidc.ErrServerError().WithDescription("revocation is not supported")
}
func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}
func (s *storage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errUnsupported
}
func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}
func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errUnsupported
}
func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errUnsupported
}
func (s *storage) Health(context.Context) error { return nil }

// opClient is a client as the library sees it: confidential, machine grants
// only, JWT access tokens.
type opClient struct{ client }

func (c opClient) GetID() string                        { return c.id }
func (c opClient) RedirectURIs() []string               { return nil }
func (c opClient) PostLogoutRedirectURIs() []string     { return nil }
func (c opClient) ApplicationType() op.ApplicationType  { return op.ApplicationTypeWeb }
func (c opClient) AuthMethod() oidc.AuthMethod          { return oidc.AuthMethodBasic }
func (c opClient) ResponseTypes() []oidc.ResponseType   { return nil }
func (c opClient) LoginURL(string) string               { return "" }
func (c opClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c opClient) IDTokenLifetime() time.Duration       { return time.Hour }
func (c opClient) DevMode() bool                        { return false }
func (c opClient) IsScopeAllowed(string) bool           { return true }
func (c opClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c opClient) ClockSkew() time.Duration             { return 0 }
func (c opClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials, oidc.GrantTypeTokenExchange}
}
func (c opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
