package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// Credentials add the gateway's own credentials for an upstream
// (upstreams[].auth) to each HTTP request to it. The host's credentials
// are never among them: an upstream gets only what the gateway was
// configured to give it (MCP authorization, "Token Passthrough": a
// server must not accept, and so a gateway must not forward, tokens
// that were not issued for it).
type Credentials interface {
	// Apply sets the credential headers on h for a request made on behalf
	// of ctx: a call's context (which may carry a Subject), or the
	// client's own for the requests it makes by itself (handshake, GET
	// stream, DELETE). An error fails the request; its text must hold no
	// secret.
	Apply(ctx context.Context, h http.Header) error
}

// ErrCredentials: the gateway could not get its credentials for an
// upstream (a token endpoint failed, a secret file is unreadable). The
// request was not sent. The error is a *CredentialsError.
var ErrCredentials = errors.New("upstream credentials unavailable")

// CredentialsError says why the gateway has no credentials for an
// upstream. Its text names the upstream and where the credentials come
// from, never a secret or a token.
type CredentialsError struct {
	// Upstream is the upstream's name.
	Upstream string
	// What says what failed, such as `could not get a token for upstream
	// "crm" from idp.example.com`.
	What string
	// Err is the cause, free of secrets.
	Err error
}

func (e *CredentialsError) Error() string {
	return fmt.Sprintf("the gateway %s: %v", e.What, e.Err)
}

func (e *CredentialsError) Unwrap() error { return e.Err }

// Is matches ErrCredentials.
func (e *CredentialsError) Is(target error) bool { return target == ErrCredentials }

// Subject is a host's validated OAuth access token, carried to the
// upstream layer only to be exchanged for a token meant for an upstream
// (RFC 8693, upstreams[].auth.token_exchange). It is never sent to an
// upstream, and it formats as its ID alone, so that logging it by
// mistake shows no token.
type Subject struct {
	// ID is who the token belongs to (policy.Identity.ID): exchanged
	// tokens are cached per ID.
	ID    string
	token string
}

// NewSubject returns the Subject of identity id holding token.
func NewSubject(id, token string) Subject { return Subject{ID: id, token: token} }

// String hides the token.
func (s Subject) String() string { return "subject(" + s.ID + ")" }

// LogValue hides the token.
func (s Subject) LogValue() slog.Value { return slog.StringValue(s.String()) }

// GoString hides the token from %#v.
func (s Subject) GoString() string { return s.String() }

type subjectKey struct{}

// WithSubject returns ctx carrying s: a token_exchange upstream's
// requests for ctx are made with a token exchanged for s's.
func WithSubject(ctx context.Context, s Subject) context.Context {
	return context.WithValue(ctx, subjectKey{}, s)
}

func subjectOf(ctx context.Context) (Subject, bool) {
	s, ok := ctx.Value(subjectKey{}).(Subject)
	return s, ok && s.token != ""
}

// secretCheckInterval is how often a secret file is checked for a change.
const secretCheckInterval = time.Second

// now is time.Now; tests of file secrets replace it.
type clock func() time.Time

// SecretHeaders returns Credentials that set headers from secrets
// (upstreams[].auth.headers): an environment variable's value, read when
// the config was loaded, or a file's, read again when its size or
// modification time changes (checked at most once per second), so that
// a rotated Kubernetes secret takes effect without a restart. A file
// that cannot be read fails the requests (so the upstream's start, and
// /readyz says why) until it can.
func SecretHeaders(upstreamName string, headers map[string]config.Secret) Credentials {
	return secretHeaders(upstreamName, headers, time.Now)
}

func secretHeaders(upstreamName string, headers map[string]config.Secret, now clock) *headerCreds {
	hc := &headerCreds{}
	for name, s := range headers {
		src := &secretSource{what: fmt.Sprintf("could not read the secret of header %s of upstream %q", name, upstreamName), upstream: upstreamName, secret: s, now: now}
		hc.headers = append(hc.headers, headerSource{name: http.CanonicalHeaderKey(name), src: src})
	}
	return hc
}

type headerSource struct {
	name string // canonical
	src  *secretSource
}

type headerCreds struct {
	headers []headerSource
}

func (hc *headerCreds) Apply(_ context.Context, h http.Header) error {
	for _, s := range hc.headers {
		v, err := s.src.value()
		if err != nil {
			return err
		}
		h[s.name] = []string{s.src.secret.Prefix + v}
	}
	return nil
}

// secretSource reads a config.Secret: an environment variable's value as
// loaded, or a file, read again when it changes.
type secretSource struct {
	what, upstream string
	secret         config.Secret
	now            clock

	mu sync.Mutex // guards the fields below
	// checked is when the file was last looked at; size and mod what it
	// was then; val its trimmed content.
	checked time.Time
	size    int64
	mod     time.Time
	val     string
	loaded  bool
}

// value returns the secret. A file that cannot be read after it was read
// once keeps its last value (a Kubernetes secret update swaps a symlink,
// and a read may fall between its steps); the next check tries again.
func (s *secretSource) value() (string, error) {
	if s.secret.File == "" {
		return s.secret.Value, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.loaded && now.Sub(s.checked) < secretCheckInterval {
		return s.val, nil
	}
	s.checked = now
	fi, err := os.Stat(s.secret.File)
	if err == nil && s.loaded && fi.Size() == s.size && fi.ModTime().Equal(s.mod) {
		return s.val, nil
	}
	var b []byte
	if err == nil {
		b, err = os.ReadFile(s.secret.File)
	}
	if err != nil {
		if s.loaded {
			return s.val, nil
		}
		// The path is configuration, not a secret; os errors name it.
		return "", &CredentialsError{Upstream: s.upstream, What: s.what, Err: err}
	}
	v := strings.TrimSpace(string(b))
	if strings.ContainsAny(v, "\r\n\x00") {
		err := fmt.Errorf("the file %s holds CR, LF or NUL inside its value", s.secret.File)
		if s.loaded {
			return s.val, nil
		}
		return "", &CredentialsError{Upstream: s.upstream, What: s.what, Err: err}
	}
	s.val, s.size, s.mod, s.loaded = v, fi.Size(), fi.ModTime(), true
	return v, nil
}

// rejecter is implemented by Credentials holding tokens: reject drops
// the token sent as authorization (the header's value), which the
// upstream refused, and reports whether it was the one held.
type rejecter interface {
	reject(authorization string) bool
}

// chain applies several Credentials in order.
type chain []Credentials

func (c chain) reject(authorization string) bool {
	for _, cr := range c {
		if r, ok := cr.(rejecter); ok && r.reject(authorization) {
			return true
		}
	}
	return false
}

func (c chain) Apply(ctx context.Context, h http.Header) error {
	for _, cr := range c {
		if err := cr.Apply(ctx, h); err != nil {
			return err
		}
	}
	return nil
}

// Chain returns Credentials that apply each of cs in order; nil ones are
// skipped. It returns nil when none is left.
func Chain(cs ...Credentials) Credentials {
	var out chain
	for _, c := range cs {
		if c != nil {
			out = append(out, c)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return out
}
