package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// TokenOptions configure NewClientCredentials and NewTokenExchange.
type TokenOptions struct {
	// Upstream is the upstream's name, for errors.
	Upstream string
	// Client is the OAuth client and token endpoint
	// (upstreams[].auth.oauth or token_exchange).
	Client config.OAuthClient
	// HTTPClient makes the token requests; nil means one with dial and
	// TLS timeouts. Each request is bounded by FetchTimeout.
	HTTPClient *http.Client
	// FetchTimeout bounds one token request; 0 means
	// config.TokenFetchTimeout.
	FetchTimeout time.Duration

	now clock // nil means time.Now
}

func (o *TokenOptions) fill() {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{
			Transport: &http.Transport{
				Proxy:               http.ProxyFromEnvironment,
				DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
				TLSHandshakeTimeout: 10 * time.Second,
				MaxIdleConnsPerHost: 4,
			},
			// A redirect is not followed: a 307 would carry the client's
			// credentials and the host's subject_token (the body).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = config.TokenFetchTimeout
	}
	if o.now == nil {
		o.now = time.Now
	}
}

// tokenEndpoint fetches tokens for one upstream from its token endpoint.
type tokenEndpoint struct {
	opts   TokenOptions
	host   string // of the token URL, for errors
	secret *secretSource
}

func newTokenEndpoint(o *TokenOptions) *tokenEndpoint {
	opts := *o
	opts.fill()
	host := opts.Client.TokenURL
	if u, err := url.Parse(host); err == nil && u.Host != "" {
		host = u.Host
	}
	return &tokenEndpoint{opts: opts, host: host, secret: &secretSource{
		what:     fmt.Sprintf("could not read the client secret for upstream %q", opts.Upstream),
		upstream: opts.Upstream, secret: opts.Client.ClientSecret, now: opts.now,
	}}
}

// fetch asks the token endpoint for a token with the client's grant, or
// the grant and parameters of extra (token exchange).
func (e *tokenEndpoint) fetch(ctx context.Context, extra url.Values) (*oauth2.Token, error) {
	secret, err := e.secret.value()
	if err != nil {
		return nil, err
	}
	c := e.opts.Client
	params := url.Values{}
	if c.Resource != "" {
		params.Set("resource", c.Resource)
	}
	if c.Audience != "" {
		params.Set("audience", c.Audience)
	}
	for k, v := range extra {
		params[k] = v
	}
	conf := clientcredentials.Config{
		ClientID: c.ClientID, ClientSecret: secret, TokenURL: c.TokenURL,
		Scopes: c.Scopes, EndpointParams: params,
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, e.opts.HTTPClient)
	tok, err := conf.Token(ctx)
	if err != nil {
		return nil, e.fail(ctx, err, secret, extra.Get("subject_token"))
	}
	return tok, nil
}

// fail turns a token request's error into a *CredentialsError that
// names the upstream and the token endpoint's host, and keeps only what
// holds no secret: the status, the OAuth error code and description,
// or the network error (oauth2's own text quotes the whole response
// body). The description is the endpoint's own text, and some endpoints
// quote what they refused: each of hide (the client secret, the host's
// token) is cut out of it.
func (e *tokenEndpoint) fail(ctx context.Context, err error, hide ...string) error {
	var cause error
	var re *oauth2.RetrieveError
	var ue *url.Error
	switch {
	case errors.As(err, &re):
		status := "an error"
		if re.Response != nil {
			status = re.Response.Status
		}
		if re.ErrorCode != "" {
			desc := re.ErrorDescription
			for _, h := range hide {
				if h != "" {
					desc = strings.ReplaceAll(desc, h, "[redacted]")
				}
			}
			if len(desc) > 200 {
				desc = desc[:200] + "..."
			}
			cause = fmt.Errorf("it answered %s: %s %q", status, re.ErrorCode, desc)
		} else {
			cause = fmt.Errorf("it answered %s", status)
		}
	case ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
		cause = fmt.Errorf("it did not answer within %s", e.opts.FetchTimeout)
	case errors.As(err, &ue):
		cause = ue.Err
	default:
		cause = err
	}
	return &CredentialsError{Upstream: e.opts.Upstream,
		What: fmt.Sprintf("could not get a token for upstream %q from %s", e.opts.Upstream, e.host), Err: cause}
}

// tokenCache holds one access token and fetches a new one shortly before
// it expires (config.TokenRefreshMargin), one fetch at a time: the
// requests that need a token while one is being fetched wait for it.
type tokenCache struct {
	now     clock
	timeout time.Duration
	// waiting, if set, is called when a caller starts waiting for the
	// fetch in flight; for tests.
	waiting func()

	mu sync.Mutex // guards the fields below
	// tok is the token and got when it came; nil before the first.
	tok *oauth2.Token
	got time.Time
	// wait is non-nil while a fetch is in flight and closed when it
	// ends; err is that fetch's error.
	wait chan struct{}
	err  error
}

// freshLocked reports whether the cached token may be used now.
func (tc *tokenCache) freshLocked() bool {
	if tc.tok == nil || tc.tok.AccessToken == "" {
		return false
	}
	now := tc.now()
	if tc.tok.Expiry.IsZero() {
		return now.Sub(tc.got) < config.TokenLifetimeUnknown
	}
	margin := min(config.TokenRefreshMargin, tc.tok.Expiry.Sub(tc.got)/2)
	return now.Before(tc.tok.Expiry.Add(-margin))
}

// token returns a fresh token, calling fetch when there is none. ctx
// bounds the wait; a fetch is also bounded by tc.timeout.
func (tc *tokenCache) token(ctx context.Context, fetch func(context.Context) (*oauth2.Token, error)) (string, error) {
	for {
		tc.mu.Lock()
		if tc.freshLocked() {
			t := tc.tok.AccessToken
			tc.mu.Unlock()
			return t, nil
		}
		if w := tc.wait; w != nil {
			tc.mu.Unlock()
			if tc.waiting != nil {
				tc.waiting()
			}
			select {
			case <-w:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			tc.mu.Lock()
			err, fresh := tc.err, tc.freshLocked()
			tc.mu.Unlock()
			// A fetch that failed for its own caller's cancellation
			// says nothing of the endpoint: try again.
			if !fresh && err != nil && !errors.Is(err, context.Canceled) {
				return "", err
			}
			continue
		}
		wait := make(chan struct{})
		tc.wait = wait
		tc.mu.Unlock()

		fctx, cancel := context.WithTimeout(ctx, tc.timeout)
		tok, err := fetch(fctx)
		cancel()
		if err == nil && tok.AccessToken == "" {
			err = errors.New("the token response has no access_token")
		}
		tc.mu.Lock()
		if err == nil {
			tc.tok, tc.got = tok, tc.now()
		}
		tc.err, tc.wait = err, nil
		close(wait)
		tc.mu.Unlock()
		if err != nil {
			return "", err
		}
		return tok.AccessToken, nil
	}
}

// drop forgets the cached token if it is authorization's bearer token.
func (tc *tokenCache) drop(authorization string) bool {
	tok, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok {
		return false
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.tok == nil || tc.tok.AccessToken != tok {
		return false
	}
	tc.tok = nil
	return true
}

// clientCredentials is the gateway's own token for an upstream.
type clientCredentials struct {
	ep    *tokenEndpoint
	cache *tokenCache
}

// NewClientCredentials returns Credentials that send Authorization:
// Bearer with an access token got with the OAuth client credentials
// grant (upstreams[].auth.oauth), cached and fetched again shortly
// before it expires, one fetch at a time. The client secret is read
// (from its file) for each fetch, so a rotated secret is used at the
// next one.
func NewClientCredentials(o *TokenOptions) Credentials {
	ep := newTokenEndpoint(o)
	return &clientCredentials{ep: ep, cache: &tokenCache{now: ep.opts.now, timeout: ep.opts.FetchTimeout}}
}

func (c *clientCredentials) Apply(ctx context.Context, h http.Header) error {
	tok, err := c.cache.token(ctx, func(ctx context.Context) (*oauth2.Token, error) { return c.ep.fetch(ctx, nil) })
	if err != nil {
		return c.ep.wrap(err)
	}
	h["Authorization"] = []string{"Bearer " + tok}
	return nil
}

func (c *clientCredentials) reject(authorization string) bool { return c.cache.drop(authorization) }

// wrap makes err, which may be a context's, a *CredentialsError.
func (e *tokenEndpoint) wrap(err error) error {
	var ce *CredentialsError
	if errors.As(err, &ce) {
		return err
	}
	return &CredentialsError{Upstream: e.opts.Upstream,
		What: fmt.Sprintf("could not get a token for upstream %q from %s", e.opts.Upstream, e.host), Err: err}
}

// Token exchange (RFC 8693, section 2.1) parameters.
const (
	grantTokenExchange   = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
)

// maxExchangeSubjects bounds the subjects whose exchanged tokens are
// kept; past it, the expired ones are dropped.
const maxExchangeSubjects = 4096

// TokenExchange exchanges hosts' tokens for tokens meant for one
// upstream (upstreams[].auth.token_exchange), and caches them per
// subject until shortly before they expire. Its For method gives the
// Credentials of one per-client session.
type TokenExchange struct {
	ep *tokenEndpoint

	mu    sync.Mutex // guards cache
	cache map[string]*tokenCache
}

// NewTokenExchange returns the token exchange of one upstream.
func NewTokenExchange(o *TokenOptions) *TokenExchange {
	return &TokenExchange{ep: newTokenEndpoint(o), cache: map[string]*tokenCache{}}
}

// For returns the Credentials of one upstream session, which belongs to
// one subject: each request is made with a token exchanged for the
// Subject of its context (see WithSubject), or, for the requests the
// session makes by itself, for the last Subject it saw. A Subject of
// another ID is refused: a session never changes hands.
func (x *TokenExchange) For() Credentials { return &exchangeCreds{x: x} }

type exchangeCreds struct {
	x *TokenExchange

	mu   sync.Mutex // guards last
	last Subject
}

func (c *exchangeCreds) Apply(ctx context.Context, h http.Header) error {
	s, ok := subjectOf(ctx)
	c.mu.Lock()
	switch {
	case !ok && c.last.token == "":
		c.mu.Unlock()
		return c.x.ep.wrap(errors.New("this request carries no OAuth token of a host to exchange (token_exchange needs a host authenticated with auth.mode oauth)"))
	case !ok:
		s = c.last
	case c.last.ID != "" && c.last.ID != s.ID:
		c.mu.Unlock()
		return c.x.ep.wrap(errors.New("the upstream session belongs to another identity"))
	default:
		c.last = s
	}
	c.mu.Unlock()
	tok, err := c.x.cacheOf(s.ID).token(ctx, func(ctx context.Context) (*oauth2.Token, error) {
		return c.x.ep.fetch(ctx, url.Values{
			"grant_type":         {grantTokenExchange},
			"subject_token":      {s.token},
			"subject_token_type": {tokenTypeAccessToken},
		})
	})
	if err != nil {
		return c.x.ep.wrap(err)
	}
	h["Authorization"] = []string{"Bearer " + tok}
	return nil
}

func (c *exchangeCreds) reject(authorization string) bool {
	c.mu.Lock()
	id := c.last.ID
	c.mu.Unlock()
	return id != "" && c.x.cacheOf(id).drop(authorization)
}

// cacheOf returns the token cache of subject id.
func (x *TokenExchange) cacheOf(id string) *tokenCache {
	x.mu.Lock()
	defer x.mu.Unlock()
	tc, ok := x.cache[id]
	if ok {
		return tc
	}
	if len(x.cache) >= maxExchangeSubjects {
		for k, old := range x.cache {
			old.mu.Lock()
			stale := old.wait == nil && !old.freshLocked()
			old.mu.Unlock()
			if stale {
				delete(x.cache, k)
			}
		}
	}
	tc = &tokenCache{now: x.ep.opts.now, timeout: x.ep.opts.FetchTimeout}
	x.cache[id] = tc
	return tc
}
