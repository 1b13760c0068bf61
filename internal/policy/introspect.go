package policy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// maxIntrospected bounds the introspection answers OAuth keeps.
const maxIntrospected = 4096

// introspection is how the gateway asks one issuer about opaque tokens
// (RFC 7662), as a client of that issuer.
type introspection struct {
	url      string // "" until discovery names it (is.mu guards it then)
	clientID string
	secret   config.Secret
	client   *http.Client
}

// introspected is a cached answer about one token.
type introspected struct {
	is *issuer
	// claims is the answer of the issuer that said the token is active;
	// nil when none did.
	claims claimSet
	// until is when the answer is asked again: config.IntrospectionCacheTTL
	// after it came, or the token's exp if sooner.
	until time.Time
}

// pendingIntrospection is an introspection in flight, which the requests
// that carry the same token wait for instead of asking again.
type pendingIntrospection struct {
	done chan struct{}
	res  introspected
	err  error
}

// introspect returns the identity of an opaque token, asking the issuers
// that configured introspection, in their order, until one says it is
// active. The answer (active or not) is cached under the token's SHA-256,
// never the token itself; a failure to ask is not.
func (o *OAuth) introspect(ctx context.Context, token string) (Identity, error) {
	res, err := o.introspection(ctx, sha256.Sum256([]byte(token)), token)
	if err != nil {
		return Identity{}, err
	}
	if res.claims == nil {
		return Identity{}, errors.New("the issuer says the token is not active")
	}
	return o.admit(res.is, res.claims, true)
}

// introspection returns the cached answer about the token whose SHA-256
// is sum, or asks for it (once for all the requests that wait for it).
func (o *OAuth) introspection(ctx context.Context, sum [32]byte, token string) (introspected, error) {
	o.imu.Lock()
	if res, ok := o.answers[sum]; ok && o.now().Before(res.until) {
		o.imu.Unlock()
		return res, nil
	}
	if p, ok := o.pending[sum]; ok {
		o.imu.Unlock()
		if o.onWait != nil {
			o.onWait()
		}
		select {
		case <-p.done:
			return p.res, p.err
		case <-ctx.Done():
			return introspected{}, ctx.Err()
		}
	}
	p := &pendingIntrospection{done: make(chan struct{})}
	o.pending[sum] = p
	o.imu.Unlock()

	p.res, p.err = o.askIssuers(ctx, token)
	o.imu.Lock()
	delete(o.pending, sum)
	if p.err == nil {
		o.remember(sum, p.res)
	}
	o.imu.Unlock()
	close(p.done)
	return p.res, p.err
}

// remember caches an answer; o.imu is held. When the cache is full the
// answers past their time go first, then arbitrary ones (map order):
// a token whose answer is dropped is only asked about again.
func (o *OAuth) remember(sum [32]byte, res introspected) {
	if len(o.answers) >= maxIntrospected {
		now := o.now()
		for k, v := range o.answers {
			if !now.Before(v.until) {
				delete(o.answers, k)
			}
		}
		for k := range o.answers {
			if len(o.answers) < maxIntrospected {
				break
			}
			delete(o.answers, k)
		}
	}
	o.answers[sum] = res
}

// askIssuers asks each issuer with introspection about token, once a
// slot is free (o.slots). An issuer that cannot be asked is logged and
// skipped; when no issuer said active and one could not be asked, that
// is the error.
func (o *OAuth) askIssuers(ctx context.Context, token string) (introspected, error) {
	select {
	case o.slots <- struct{}{}:
	default:
		if o.onQueue != nil {
			o.onQueue()
		}
		select {
		case o.slots <- struct{}{}:
		case <-ctx.Done():
			return introspected{}, fmt.Errorf("%d introspections were in flight: %w", cap(o.slots), ctx.Err())
		}
	}
	defer func() { <-o.slots }()
	var failed error
	for _, is := range o.introspecting {
		claims, err := is.introspect(ctx, token, o.now)
		if err != nil {
			o.log.Warn("oauth introspection failed", "issuer", is.iss, "err", err.Error())
			failed = fmt.Errorf("issuer %s: introspection failed: %v", is.iss, err)
			continue
		}
		if claims == nil {
			continue
		}
		until := o.now().Add(config.IntrospectionCacheTTL)
		if exp, ok, err := claims.time("exp"); err == nil && ok && exp.Before(until) {
			until = exp
		}
		return introspected{is: is, claims: claims, until: until}, nil
	}
	if failed != nil {
		return introspected{}, failed
	}
	return introspected{until: o.now().Add(config.IntrospectionCacheTTL)}, nil
}

// introspect asks the issuer about token: the answer's members when it
// is active, nil when it is not. Errors name the endpoint, never the
// token or the secret.
func (is *issuer) introspect(ctx context.Context, token string, now func() time.Time) (claimSet, error) {
	endpoint, err := is.introspectionURL(ctx, now)
	if err != nil {
		return nil, err
	}
	in := is.intro
	secret, err := readSecret(in.secret)
	if err != nil {
		return nil, err
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("introspection endpoint: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 §2.3.1: each part form-encoded before Basic.
	req.SetBasicAuth(url.QueryEscape(in.clientID), url.QueryEscape(secret))
	resp, err := in.client.Do(req)
	if err != nil {
		return nil, err // a *url.Error: the endpoint's URL and the cause
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", endpoint, resp.Status)
	}
	var answer claimSet
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return nil, fmt.Errorf("%s: the answer is not a JSON object: %v", endpoint, err)
	}
	active, ok := answer["active"].(bool)
	if !ok {
		return nil, fmt.Errorf("%s: the answer has no boolean active", endpoint)
	}
	if !active {
		return nil, nil
	}
	if _, ok := answer["iss"]; !ok {
		// The answer is this issuer's, and says so, for teams that match
		// the claim iss: a team meant for one issuer's users must match
		// its opaque tokens as it does its JWTs.
		answer["iss"] = is.iss
	}
	return answer, nil
}

// introspectionURL returns the configured endpoint, or the one the
// issuer's discovery document names.
func (is *issuer) introspectionURL(ctx context.Context, now func() time.Time) (string, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.intro.url != "" {
		return is.intro.url, nil
	}
	meta, err := is.discoverLocked(ctx, now)
	if err != nil {
		return "", err
	}
	if meta.IntrospectionEndpoint == "" {
		return "", errors.New("the discovery document names no introspection_endpoint (set introspection.url)")
	}
	is.intro.url = meta.IntrospectionEndpoint
	return is.intro.url, nil
}

// readSecret returns the secret s points to: an environment variable's
// value as read when the config was loaded, or the file read now, so that
// a rotated file is picked up. Errors name the variable or file, never a
// value.
func readSecret(s config.Secret) (string, error) {
	if s.Env != "" {
		if s.Value == "" {
			return "", fmt.Errorf("the client secret's variable %s is not set", s.Env)
		}
		return s.Value, nil
	}
	b, err := os.ReadFile(s.File)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is named below
		}
		return "", fmt.Errorf("reading the client secret file %s: %v", s.File, err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("the client secret file %s is empty", s.File)
	}
	return v, nil
}
