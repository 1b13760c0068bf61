package config

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid matches every [*ValidationError] under [errors.Is].
var ErrInvalid = errors.New("invalid configuration")

// Problem is one thing wrong with a configuration, or one warning.
type Problem struct {
	// Path is the key path of the offending value, such as
	// "upstreams[2].timeout", "mcpServers.GitHub.command" or
	// `upstreams[0].headers["X Bad"]`. Empty for a problem with the file as
	// a whole, such as a syntax error.
	Path string
	// Line is the 1-based line in the file where the value is, when known;
	// 0 otherwise (values set from the environment, Configs built in code).
	Line int
	// Message says what is wrong and what is expected. It never contains a
	// configured value.
	Message string
}

// String returns "<path>: <message>", or the message alone when Path is empty.
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ValidationError lists every problem found in a configuration.
type ValidationError struct {
	Problems []Problem
}

// Error returns one problem per line, "<path>: <message>".
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Is reports whether target is [ErrInvalid].
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// problems collects Problems in the order they are found.
type problems []Problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// err returns nil for no problems, else a *ValidationError.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps}
}

var (
	nameRE     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
	teamNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	// profileNameRE: lower case only, so that /mcp/Coding and /mcp/coding
	// are not two profiles a case-folding proxy in front would merge.
	profileNameRE = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)
	toolNameRE    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	separatorRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,4}$`)
)

// reservedPaths are served by the gateway itself, beside the MCP endpoint.
var reservedPaths = []string{"/healthz", "/readyz", "/metrics"}

// Validate checks c and returns a *ValidationError listing every problem, or
// nil. It does not touch the network or the file system. [Load] calls it.
func (c *Config) Validate() error {
	var ps problems
	if !validListen(c.Listen) {
		ps.add("listen", "must be host:port with a numeric port, such as 127.0.0.1:8080 or :8080")
	}
	switch {
	case !strings.HasPrefix(c.Endpoint, "/"):
		ps.add("endpoint", `must be a URL path starting with "/", such as /mcp`)
	case strings.ContainsAny(c.Endpoint, "?# \t\r\n"):
		ps.add("endpoint", "must be a plain URL path, without query, fragment or spaces")
	default:
		for _, r := range reservedPaths {
			if c.Endpoint == r {
				ps.add("endpoint", "may not be %s, which the gateway serves itself", r)
			}
		}
	}
	if t := c.TLS; t != nil {
		if t.CertFile == "" {
			ps.add("tls.cert_file", "is required under tls: the PEM certificate chain of the listener")
		}
		if t.KeyFile == "" {
			ps.add("tls.key_file", "is required under tls: the PEM private key of the certificate")
		}
	}
	if !separatorRE.MatchString(c.Separator) {
		ps.add("separator", "must be 1 to 4 characters from A-Z, a-z, 0-9, _ and -")
	}
	if c.Prefix != PrefixAlways && c.Prefix != PrefixOnConflict {
		ps.add("prefix", "must be always or on_conflict")
	}
	for i, o := range c.AllowedOrigins {
		if !validOrigin(o) {
			ps.add(fmt.Sprintf("allowed_origins[%d]", i), "must be an origin, scheme://host or scheme://host:port, such as https://app.example.com")
		}
	}
	for i, h := range c.AllowedHosts {
		if !validHostValue(h) {
			ps.add(fmt.Sprintf("allowed_hosts[%d]", i), "must be a host name or IP, optionally with :port, such as gw.example.com or 10.0.0.5:8080")
		}
	}
	switch {
	case c.MaxBodyBytes <= 0:
		ps.add("max_body_bytes", "must be greater than 0")
	case c.MaxBodyBytes > MaxMaxBodyBytes:
		ps.add("max_body_bytes", "must be at most %d (1 GiB)", MaxMaxBodyBytes)
	}

	seen := map[string]string{} // lower-cased name -> path of its first use
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		u.validate(i, &ps)
		if u.Auth.TokenExchange != nil && c.Auth.Mode != AuthOAuth {
			ps.add(u.root(i)+".auth.token_exchange", "needs auth.mode oauth: it exchanges the host's OAuth token, and hosts present none under auth.mode %s", c.Auth.Mode)
		}
		if u.Name == "" {
			continue
		}
		key := strings.ToLower(u.Name)
		if first, dup := seen[key]; dup {
			ps.add(u.path(i, "name"), "upstream name %q already used by %s (names must differ in more than letter case)", u.Name, first)
		} else {
			seen[key] = u.root(i)
		}
	}

	if c.Policy.MaxTools < 0 {
		ps.add("policy.max_tools", "must be 0 (no limit) or more")
	}
	if c.Policy.DescriptionMaxChars < 0 {
		ps.add("policy.description_max_chars", "must be 0 (no limit) or more")
	}
	if c.Policy.MaxTokens < 0 {
		ps.add("policy.max_tokens", "must be 0 (no limit) or more")
	}
	validateGlobs(&ps, "policy.priority", c.Policy.Priority)
	if c.Policy.Mode != "" && !c.Policy.Mode.valid() {
		ps.add("policy.mode", "must be full, search or auto")
	}
	if c.Policy.Mode == ModeAuto && c.Policy.MaxTokens == 0 {
		ps.add("policy.mode", "auto needs policy.max_tokens: the budget past which the view switches to search mode")
	}

	c.validateTeams(&ps)
	c.validateProfiles(&ps)
	c.Limits.validate(&ps)
	c.Tasks.validate(&ps)
	c.State.validate(&ps)
	c.Shutdown.validate(&ps)
	c.Pinning.validate(&ps)
	c.validateConsole(&ps)

	switch c.Auth.Mode {
	case AuthNone:
	case AuthAPIKey:
		if !c.anyTeamKeys() {
			ps.add("auth.mode", "api_key needs at least one team with api_keys")
		}
	case AuthOAuth:
		c.Auth.OAuth.validate(&ps)
	case AuthJWT:
		ps.add("auth.mode", "jwt is now called oauth: write mode: oauth and configure auth.oauth (resource, issuers)")
	default:
		ps.add("auth.mode", "must be none, api_key or oauth")
	}

	switch c.Telemetry.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		ps.add("telemetry.log_level", "must be debug, info, warn or error")
	}
	if c.Telemetry.OTLPEndpoint != "" && !validHTTPURL(c.Telemetry.OTLPEndpoint) {
		ps.add("telemetry.otlp_endpoint", "must be an absolute http:// or https:// URL, such as http://otel-collector:4318")
	}
	if a := c.Telemetry.Audit.Arguments; a != AuditOmit && a != AuditHash {
		ps.add("telemetry.audit.arguments", "must be omit or hash")
	}
	if strings.ContainsRune(c.Telemetry.Audit.Path, 0) {
		ps.add("telemetry.audit.path", "may not contain NUL")
	}
	return ps.err()
}

func (c *Config) anyTeamKeys() bool {
	for _, t := range c.Teams {
		if len(t.APIKeys) > 0 {
			return true
		}
	}
	return false
}

func (c *Config) validateTeams(ps *problems) {
	names := map[string]int{}
	keys := map[[sha256.Size]byte]string{} // digest of a key -> path of its first use
	for i, t := range c.Teams {
		p := fmt.Sprintf("teams[%d]", i)
		switch first, dup := names[t.Name]; {
		case t.Name == "":
			ps.add(p+".name", "is required: 1 to 64 characters from A-Z, a-z, 0-9, _ and -")
		case !teamNameRE.MatchString(t.Name):
			ps.add(p+".name", "must be 1 to 64 characters from A-Z, a-z, 0-9, _ and -")
		case dup:
			ps.add(p+".name", "team name %q already used by teams[%d]", t.Name, first)
		default:
			names[t.Name] = i
		}
		for j, k := range t.APIKeys {
			kp := fmt.Sprintf("%s.api_keys[%d]", p, j)
			digest, ok := keyDigest(k)
			if !ok {
				if k == "" {
					ps.add(kp, "is empty")
				} else {
					ps.add(kp, `a "sha256:" key must be followed by exactly 64 hex digits`)
				}
				continue
			}
			if first, dup := keys[digest]; dup {
				ps.add(kp, "same API key as %s (a key selects one team)", first)
				continue
			}
			keys[digest] = kp
		}
		c.validateView(ps, p, "team", t.Allow, t.Deny, nil, t.MaxTools, t.MaxTokens, t.Mode)
		if t.Limits != nil {
			t.Limits.PerIdentity.validate(p+".limits.per_identity", ps)
			t.Limits.Team.validate(p+".limits.team", ps)
		}
		for _, claim := range sortedClaimKeys(t.Claims) {
			cp := join(p+".claims", claim)
			if strings.Trim(claim, ".") == "" || strings.Contains(claim, "..") {
				ps.add(cp, "must name a claim, or a path of claim names joined by dots")
			}
			if len(t.Claims[claim]) == 0 {
				ps.add(cp, "must list at least one value that matches")
			}
			for j, v := range t.Claims[claim] {
				if v == "" {
					ps.add(fmt.Sprintf("%s[%d]", cp, j), "is empty")
				}
			}
		}
		switch t.ClaimsMatch {
		case "", ClaimsAny, ClaimsAll:
		default:
			ps.add(p+".claims_match", "must be any or all")
		}
		validateScopes(ps, p+".scopes", t.Scopes)
	}
}

// validateView checks the fields a team (kind "team") and a profile
// (kind "profile") share: those of a view, at key path p.
func (c *Config) validateView(ps *problems, p, kind string, allow, deny, priority []string, maxTools, maxTokens int, mode ViewMode) {
	validateGlobs(ps, p+".allow", allow)
	validateGlobs(ps, p+".deny", deny)
	validateGlobs(ps, p+".priority", priority)
	if maxTools < 0 {
		ps.add(p+".max_tools", "must be 0 (no limit) or more")
	}
	if maxTokens < 0 {
		ps.add(p+".max_tokens", "must be 0 (no limit) or more")
	}
	inherits := "policy.mode"
	if kind == "profile" {
		inherits = "the caller's team's mode, else policy.mode"
	}
	if mode != "" && !mode.valid() {
		ps.add(p+".mode", "must be full, search or auto (or left out, to take %s)", inherits)
	}
	if mode == ModeAuto && maxTokens == 0 && c.Policy.MaxTokens == 0 {
		ps.add(p+".mode", "auto needs max_tokens (the %s's or policy.max_tokens): the budget past which the view switches to search mode", kind)
	}
}

// validateProfiles checks profiles: names that make distinct paths of
// their own, and the view fields.
func (c *Config) validateProfiles(ps *problems) {
	names := map[string]int{}
	for i, pr := range c.Profiles {
		p := fmt.Sprintf("profiles[%d]", i)
		switch first, dup := names[pr.Name]; {
		case pr.Name == "":
			ps.add(p+".name", "is required: 1 to 64 characters from a-z, 0-9 and -")
		case !profileNameRE.MatchString(pr.Name):
			ps.add(p+".name", "must be 1 to 64 characters from a-z, 0-9 and - (it is the last segment of the profile's path)")
		case dup:
			ps.add(p+".name", "profile name %q already used by profiles[%d]", pr.Name, first)
		case slices.Contains(reservedPaths, ProfilePath(c.Endpoint, pr.Name)):
			ps.add(p+".name", "makes the path %s, which the gateway serves itself", ProfilePath(c.Endpoint, pr.Name))
		default:
			names[pr.Name] = i
		}
		c.validateView(ps, p, "profile", pr.Allow, pr.Deny, pr.Priority, pr.MaxTools, pr.MaxTokens, pr.Mode)
	}
}

func sortedClaimKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// validateScopes checks a list of OAuth scopes (RFC 6749 §3.3: printable
// ASCII but space, " and \).
func validateScopes(ps *problems, p string, scopes []string) {
	for i, sc := range scopes {
		ok := sc != ""
		for j := 0; j < len(sc) && ok; j++ {
			c := sc[j]
			ok = c > 0x20 && c < 0x7f && c != '"' && c != '\\'
		}
		if !ok {
			ps.add(fmt.Sprintf("%s[%d]", p, i), `must be a scope: printable ASCII characters, no spaces, quotes or backslashes`)
		}
	}
}

// validate checks an issuer's introspection settings at key path p.
func (in *Introspection) validate(ps *problems, p string) {
	if in.URL != "" && !validHTTPURL(in.URL) {
		ps.add(p+".url", "must be an absolute https:// (or http://) URL, or empty to use the issuer's discovery document")
	}
	if in.ClientID == "" {
		ps.add(p+".client_id", "is required: the gateway authenticates to the introspection endpoint as a client of the issuer")
	}
	switch s := in.ClientSecret; {
	case s.Env == "" && s.File == "":
		ps.add(p+".client_secret", "is required: {env: VAR} or {file: path}")
	case s.Env != "" && s.File != "":
		ps.add(p+".client_secret", "must set one of env and file, not both")
	}
}

// validate checks auth.oauth, under auth.mode oauth.
func (o *OAuth) validate(ps *problems) {
	const p = "auth.oauth"
	switch u, err := url.Parse(o.Resource); {
	case o.Resource == "":
		ps.add(p+".resource", "is required under auth.mode oauth: the gateway's canonical URL as hosts reach it, such as https://gw.example.com/mcp")
	case err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		ps.add(p+".resource", "must be an absolute https:// (or http://) URL, such as https://gw.example.com/mcp")
	case u.Fragment != "" || strings.Contains(o.Resource, "#"):
		ps.add(p+".resource", "may not have a fragment (RFC 8707)")
	}
	if len(o.Issuers) == 0 {
		ps.add(p+".issuers", "must list at least one issuer under auth.mode oauth")
	}
	seen := map[string]int{}
	for i, is := range o.Issuers {
		ip := fmt.Sprintf("%s.issuers[%d]", p, i)
		switch first, dup := seen[is.Issuer]; {
		case is.Issuer == "":
			ps.add(ip+".issuer", "is required: the issuer identifier, exactly as tokens carry it in iss")
		case !validHTTPURL(is.Issuer) || strings.ContainsAny(is.Issuer, "?#"):
			ps.add(ip+".issuer", "must be an absolute https:// (or http://) URL without query or fragment, such as https://idp.example.com")
		case dup:
			ps.add(ip+".issuer", "already listed as auth.oauth.issuers[%d]", first)
		default:
			seen[is.Issuer] = i
		}
		if is.JWKSURL != "" && !validHTTPURL(is.JWKSURL) {
			ps.add(ip+".jwks_url", "must be an absolute https:// (or http://) URL")
		}
		for j, a := range is.Audiences {
			if a == "" {
				ps.add(fmt.Sprintf("%s.audiences[%d]", ip, j), "is empty")
			}
		}
		if in := is.Introspection; in != nil {
			in.validate(ps, ip+".introspection")
		}
		for j, a := range is.Algorithms {
			ap := fmt.Sprintf("%s.algorithms[%d]", ip, j)
			switch {
			case slices.Contains(Algorithms, a):
			case strings.EqualFold(a, "none"):
				ps.add(ap, "none is never accepted: it means an unsigned token")
			case len(a) > 2 && strings.EqualFold(a[:2], "HS"):
				ps.add(ap, "HMAC algorithms are never accepted: an HMAC checked with a public key is forgeable by anyone who has it")
			default:
				ps.add(ap, "must be one of %s", strings.Join(Algorithms, ", "))
			}
		}
	}
	validateScopes(ps, p+".scopes_supported", o.ScopesSupported)
	validateScopes(ps, p+".required_scopes", o.RequiredScopes)
	switch {
	case o.ClockSkew < 0:
		ps.add(p+".clock_skew", "must be 0s or more")
	case o.ClockSkew > MaxClockSkew:
		ps.add(p+".clock_skew", "must be at most %s", MaxClockSkew)
	}
	switch o.Unmatched {
	case UnmatchedDefault, UnmatchedDeny:
	default:
		ps.add(p+".unmatched", "must be default or deny")
	}
}

// keyDigest returns the SHA-256 of an API key as written in api_keys: the
// digest itself for "sha256:<hex>", else the hash of the literal key.
func keyDigest(k string) (d [sha256.Size]byte, ok bool) {
	if h, isDigest := strings.CutPrefix(k, "sha256:"); isDigest {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size {
			return d, false
		}
		return [sha256.Size]byte(b), true
	}
	if k == "" {
		return d, false
	}
	return sha256.Sum256([]byte(k)), true
}

// root returns the key path that defines u.
func (u *Upstream) root(i int) string {
	if u.Source != "" {
		return u.Source
	}
	return fmt.Sprintf("upstreams[%d]", i)
}

// fromMCPServers reports whether u is an mcpServers entry.
func (u *Upstream) fromMCPServers() bool { return strings.HasPrefix(u.Source, "mcpServers") }

// path returns the key path of one of u's fields, spelt as in the file: an
// mcpServers entry has no name key (its key is the name) and calls the
// transport "type".
func (u *Upstream) path(i int, field string) string {
	if u.fromMCPServers() {
		switch field {
		case "name":
			return u.Source
		case "transport":
			field = "type"
		}
	}
	return u.root(i) + "." + field
}

func (u *Upstream) validate(i int, ps *problems) {
	if !nameRE.MatchString(u.Name) {
		// (An mcpServers key that breaks the rule was given a name
		// derived from it when the file was read: deriveNames.)
		msg := "must be 1 to 32 characters from A-Z, a-z, 0-9, _ and -"
		if u.Name == "" {
			msg = "is required: 1 to 32 characters from A-Z, a-z, 0-9, _ and -"
		}
		ps.add(u.path(i, "name"), "%s", msg)
	}

	hasCmd, hasURL := u.Command != "", u.URL != ""
	switch {
	case hasCmd && hasURL:
		ps.add(u.root(i), "has both command and url: set exactly one")
	case !hasCmd && !hasURL:
		ps.add(u.root(i), "needs a command (stdio) or a url (HTTP)")
	}
	if hasURL && !validHTTPURL(u.URL) {
		ps.add(u.path(i, "url"), "must be an absolute http:// or https:// URL")
	}

	switch u.Transport {
	case TransportStdio:
		if hasURL && !hasCmd {
			ps.add(u.path(i, "transport"), "stdio needs a command, not a url")
		}
	case TransportStreamableHTTP, TransportSSE:
		if hasCmd && !hasURL {
			ps.add(u.path(i, "transport"), "%s needs a url, not a command", u.Transport)
		}
	case "":
		// Inferred by Load when exactly one of command and url is set;
		// otherwise the problem above says what is missing.
		if hasCmd != hasURL {
			ps.add(u.path(i, "transport"), "is required: stdio, streamable-http or sse")
		}
	default:
		if u.fromMCPServers() {
			ps.add(u.path(i, "type"), "must be stdio, http, streamable-http or sse")
		} else {
			ps.add(u.path(i, "transport"), "must be stdio, streamable-http or sse")
		}
	}

	// Settings of the other kind of upstream are mistakes, not no-ops.
	if hasURL && !hasCmd {
		if len(u.Args) > 0 {
			ps.add(u.path(i, "args"), "only applies to command (stdio) upstreams")
		}
		if len(u.Env) > 0 {
			ps.add(u.path(i, "env"), "only applies to command (stdio) upstreams")
		}
		if u.Cwd != "" {
			ps.add(u.path(i, "cwd"), "only applies to command (stdio) upstreams")
		}
	}
	if hasCmd && !hasURL && len(u.Headers) > 0 {
		ps.add(u.path(i, "headers"), "only applies to url (HTTP) upstreams")
	}
	if t := u.TLS; t != nil {
		switch {
		case hasURL && !strings.HasPrefix(strings.ToLower(u.URL), "https://"):
			ps.add(u.path(i, "tls"), "only applies to https:// upstreams")
		case !hasURL:
			ps.add(u.path(i, "tls"), "only applies to url (HTTP) upstreams")
		}
		if (t.CertFile == "") != (t.KeyFile == "") {
			ps.add(u.path(i, "tls"), "cert_file and key_file go together: the client certificate and its key")
		}
	}

	for _, k := range sortedKeys(u.Env) {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			ps.add(u.path(i, "env")+keyPath(k), "variable names may not be empty or contain = or NUL")
		case strings.ContainsRune(u.Env[k], 0):
			ps.add(u.path(i, "env")+keyPath(k), "value may not contain NUL")
		}
	}
	for _, k := range sortedKeys(u.Headers) {
		switch {
		case !isToken(k):
			ps.add(u.path(i, "headers")+keyPath(k), "is not a valid HTTP header name")
		case strings.ContainsAny(u.Headers[k], "\r\n\x00"):
			ps.add(u.path(i, "headers")+keyPath(k), "value may not contain CR, LF or NUL")
		}
	}

	u.Auth.validate(u.root(i)+".auth", hasCmd && !hasURL, u.Headers, ps)

	if u.Timeout <= 0 {
		ps.add(u.path(i, "timeout"), "must be greater than 0")
	}
	if u.Session != SessionShared && u.Session != SessionPerClient {
		ps.add(u.path(i, "session"), "must be shared or per-client")
	}
	if u.MaxTools < 0 {
		ps.add(u.path(i, "max_tools"), "must be 0 (no limit) or more")
	}
	if u.MaxClients < 0 {
		ps.add(u.path(i, "max_clients"), "must be 0 (the default, 64) or more")
	}
	if u.IdleTimeout < 0 {
		ps.add(u.path(i, "idle_timeout"), "must be 0 (the default, 10m) or more")
	}
	seenRelay := map[string]bool{}
	for j, r := range u.Relay {
		switch {
		case !slices.Contains(RelayCapabilities, r):
			ps.add(fmt.Sprintf("%s[%d]", u.path(i, "relay"), j), "must be one of %s", strings.Join(RelayCapabilities, ", "))
		case seenRelay[r]:
			ps.add(fmt.Sprintf("%s[%d]", u.path(i, "relay"), j), "is listed twice")
		}
		seenRelay[r] = true
	}

	tp := u.path(i, "tools")
	validateGlobs(ps, tp+".allow", u.Tools.Allow)
	validateGlobs(ps, tp+".deny", u.Tools.Deny)
	from, to := map[string]int{}, map[string]int{}
	for j, r := range u.Tools.Rename {
		rp := fmt.Sprintf("%s.rename[%d]", tp, j)
		if r.From == "" {
			ps.add(rp+".from", "is required: the tool's original name")
		} else if first, dup := from[r.From]; dup {
			ps.add(rp+".from", "tool already renamed by rename[%d]", first)
		} else {
			from[r.From] = j
		}
		if !toolNameRE.MatchString(r.To) {
			ps.add(rp+".to", "must be 1 to 64 characters from A-Z, a-z, 0-9, _ and -")
		} else if first, dup := to[r.To]; dup {
			ps.add(rp+".to", "name already given by rename[%d]", first)
		} else {
			to[r.To] = j
		}
	}

	if u.Breaker.Failures <= 0 {
		ps.add(u.path(i, "breaker.failures"), "must be greater than 0")
	}
	if u.Breaker.Cooldown <= 0 {
		ps.add(u.path(i, "breaker.cooldown"), "must be greater than 0")
	}
	switch {
	case u.MaxTimeout < 0:
		ps.add(u.path(i, "max_timeout"), "must be 0 (the default) or more")
	case u.MaxTimeout > 0 && u.Timeout > 0 && u.MaxTimeout < u.Timeout:
		ps.add(u.path(i, "max_timeout"), "must be at least timeout (%s): progress extends a call's timeout up to it", u.Timeout)
	}
	if u.MaxInFlight < 0 {
		ps.add(u.path(i, "max_in_flight"), "must be 0 (the default, %d) or more", DefaultMaxInFlight)
	}
	if u.MaxQueue < 0 {
		ps.add(u.path(i, "max_queue"), "must be 0 (the default, %d) or more", DefaultMaxQueue)
	}
	switch {
	case u.MaxMessageBytes < 0:
		ps.add(u.path(i, "max_message_bytes"), "must be 0 (the default, %d) or more", DefaultMaxMessageBytes)
	case u.MaxMessageBytes > MaxMaxMessageBytes:
		ps.add(u.path(i, "max_message_bytes"), "must be at most %d (1 GiB)", MaxMaxMessageBytes)
	}
	rp := u.path(i, "restart")
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"delay", u.Restart.Delay}, {"max_delay", u.Restart.MaxDelay}, {"crash_window", u.Restart.CrashWindow}} {
		if d.v < 0 {
			ps.add(rp+"."+d.key, "must be 0 (the default) or more")
		}
	}
	if u.Restart.Delay > 0 && u.Restart.MaxDelay > 0 && u.Restart.MaxDelay < u.Restart.Delay {
		ps.add(rp+".max_delay", "must be at least delay (%s)", u.Restart.Delay)
	}
	if u.Tasks.After != nil {
		validateTaskAfter(ps, u.path(i, "tasks.after"), *u.Tasks.After)
	}
}

func (st *State) validate(ps *problems) {
	switch st.Store {
	case StoreMemory:
		if st.Redis != (Redis{}) {
			ps.add("state.redis", "is used only with store: redis")
		}
	case StoreRedis:
		switch u, err := url.Parse(st.Redis.URL); {
		case st.Redis.URL == "":
			ps.add("state.redis.url", "is required with store: redis (redis://host:6379/0 or rediss:// for TLS)")
		case err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "":
			ps.add("state.redis.url", "must be redis://host:port[/db] or rediss://host:port[/db]")
		case u.User != nil:
			if _, has := u.User.Password(); has {
				ps.add("state.redis.url", "must not hold a password: set state.redis.password, a secret")
			}
		}
		if st.Redis.CAFile != "" && !strings.HasPrefix(st.Redis.URL, "rediss://") {
			ps.add("state.redis.ca_file", "is used only with a rediss:// url")
		}
		if st.Key == (Secret{}) {
			ps.add("state.key", "is required with store: redis: 32 random bytes (base64 or hex) in {env: VAR} or {file: PATH}, the same on every replica (openssl rand -base64 32)")
		}
	default:
		ps.add("state.store", "must be memory or redis, not %q", st.Store)
	}
	// A key in an environment variable is known now; one in a file is
	// read, and checked, when the gateway starts.
	for _, k := range []struct {
		p string
		s Secret
	}{{"state.key", st.Key}, {"state.previous_key", st.PreviousKey}} {
		if k.s.Env != "" && k.s.Value != "" {
			if _, err := ParseStateKey(k.s.Value); err != nil {
				ps.add(k.p, "%v", err)
			}
		}
	}
	if st.PreviousKey != (Secret{}) && st.Key == (Secret{}) {
		ps.add("state.previous_key", "needs state.key")
	}
}

func (sd *Shutdown) validate(ps *problems) {
	if sd.Delay < 0 || sd.Delay > MaxShutdownDelay {
		ps.add("shutdown.delay", "must be between 0s and 5m")
	}
	if sd.Timeout <= 0 || sd.Timeout > MaxShutdownTimeout {
		ps.add("shutdown.timeout", "must be greater than 0 and at most 1h")
	}
}

func (t *Tasks) validate(ps *problems) {
	validateTaskAfter(ps, "tasks.after", t.After)
	switch {
	case t.TTL <= 0:
		ps.add("tasks.ttl", "must be greater than 0")
	case t.TTL > MaxTaskTTL:
		ps.add("tasks.ttl", "must be at most 24h")
	}
	switch {
	case t.MaxPerIdentity < 1:
		ps.add("tasks.max_per_identity", "must be at least 1")
	case t.MaxPerIdentity > MaxMaxTasks:
		ps.add("tasks.max_per_identity", "must be at most %d", MaxMaxTasks)
	}
}

// validateTaskAfter checks a tasks.after at key path p: 0 is off.
func validateTaskAfter(ps *problems, p string, after time.Duration) {
	switch {
	case after < 0:
		ps.add(p, "must be 0s (off) or more")
	case after > 0 && after < MinTaskAfter:
		ps.add(p, "must be at least 100ms (a shorter wait would make nearly every call a task), or 0s for off")
	case after > MaxTaskAfter:
		ps.add(p, "must be at most 1h")
	}
}

func validateGlobs(ps *problems, p string, globs []string) {
	for i, g := range globs {
		if g == "" {
			ps.add(fmt.Sprintf("%s[%d]", p, i), "is empty")
		} else if _, err := path.Match(g, ""); err != nil {
			ps.add(fmt.Sprintf("%s[%d]", p, i), "is not a valid glob: use * and ? as wildcards and [a-z] for classes, with every [ closed")
		}
	}
}

// validListen reports whether s is host:port with a numeric port.
func validListen(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || strings.ContainsAny(host, " \t\r\n") {
		return false
	}
	_, err = strconv.ParseUint(port, 10, 16)
	return err == nil
}

// validOrigin reports whether s is a serialized origin (RFC 6454): scheme,
// host and optional port, nothing else.
func validOrigin(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	if u.Path != "" || strings.HasSuffix(s, "/") || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#") {
		return false
	}
	return u.Scheme == "http" || u.Scheme == "https"
}

// validHostValue reports whether s is what a Host header may name: a DNS
// name or an IP address (IPv6 bare or in brackets), optionally with a
// numeric :port.
func validHostValue(s string) bool {
	host := s
	if h, port, err := net.SplitHostPort(s); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strings.TrimLeft(port, "0123456789") != "" {
			return false
		}
		host = h
	} else if inner, ok := strings.CutPrefix(s, "["); ok {
		host, ok = strings.CutSuffix(inner, "]")
		if !ok || net.ParseIP(host) == nil {
			return false
		}
	}
	if net.ParseIP(host) != nil {
		return true
	}
	if host == "" || len(host) > 253 {
		return false
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func validHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// isToken reports whether s is an HTTP token (RFC 9110, section 5.6.2), the
// syntax of a header name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// Warnings returns non-fatal findings about c: deprecated settings and
// settings that are probably not what was meant. Load does not fail on them;
// the caller logs them (mcp-gateway validate prints them).
func (c *Config) Warnings() []Problem {
	var ps problems
	if c.Auth.Mode == AuthNone && !isLoopbackListen(c.Listen) {
		ps.add("listen", "not a loopback address and auth.mode is none: anyone who can reach this address can use every upstream")
	}
	if len(c.Upstreams) == 0 {
		ps.add("upstreams", "no upstreams configured: the catalog is empty")
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.Transport == TransportSSE {
			ps.add(u.path(i, "transport"), "the HTTP+SSE transport (MCP 2024-11-05) is deprecated: use streamable-http if the server supports it")
		}
		if c.Separator != "" && strings.Contains(u.Name, c.Separator) {
			ps.add(u.path(i, "name"), "contains the separator, which makes exposed names ambiguous to read")
		}
	}
	if a := c.Telemetry.Audit; !a.Enabled && a.Path != "" {
		ps.add("telemetry.audit.path", "set, but telemetry.audit.enabled is false: nothing is audited")
	}
	if len(c.Teams) > 0 && c.Auth.Mode == AuthNone {
		ps.add("teams", "teams have no effect while auth.mode is none: every caller gets the policy view")
	}
	if c.Auth.Mode != AuthOAuth && !reflect.DeepEqual(c.Auth.OAuth, Default().Auth.OAuth) {
		ps.add("auth.oauth", "set, but auth.mode is not oauth: no token is checked against it")
	}
	c.searchWarnings(&ps)
	for i, t := range c.Teams {
		if c.Auth.Mode == AuthAPIKey && len(t.APIKeys) == 0 {
			ps.add(fmt.Sprintf("teams[%d].api_keys", i), "none: no caller can select this team under auth.mode api_key")
		}
		if c.Auth.Mode == AuthOAuth && len(t.APIKeys) == 0 && len(t.Claims) == 0 {
			ps.add(fmt.Sprintf("teams[%d].claims", i), "none, and no api_keys: no caller can select this team")
		}
		if c.Auth.Mode != AuthOAuth && (len(t.Claims) > 0 || len(t.Scopes) > 0) {
			ps.add(fmt.Sprintf("teams[%d].claims", i), "claims and scopes have no effect unless auth.mode is oauth")
		}
		for j, k := range t.APIKeys {
			if !strings.HasPrefix(k, "sha256:") && k != "" && len(k) < 16 {
				ps.add(fmt.Sprintf("teams[%d].api_keys[%d]", i, j), "shorter than 16 characters: easy to guess")
			}
		}
	}
	return ps
}

// searchWarnings reports expose_found settings that do nothing: on where
// no view is ever in search mode (found tools are only ever exposed by
// find_tools, which only search mode lists).
func (c *Config) searchWarnings(ps *problems) {
	policyMode := cmp.Or(c.Policy.Mode, DefaultMode)
	searching := policyMode != ModeFull
	for i, t := range c.Teams {
		mode := cmp.Or(t.Mode, policyMode)
		searching = searching || mode != ModeFull
		if t.Search.ExposeFound != nil && *t.Search.ExposeFound && mode == ModeFull {
			ps.add(fmt.Sprintf("teams[%d].search.expose_found", i), "true, but the team's mode is full: only a view in search or auto mode finds tools to expose")
		}
	}
	if c.Search.ExposeFound && !searching {
		ps.add("search.expose_found", "true, but no view is in search or auto mode (policy.mode, teams[].mode): nothing is found to expose")
	}
}

// isLoopbackListen reports whether the listen address binds loopback only.
func isLoopbackListen(s string) bool {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return true // invalid; Validate reports it
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// validate checks an upstream's auth at key path p. stdio says the
// upstream is a command, which takes no HTTP credentials; headers are its
// plain headers.
func (a *UpstreamAuth) validate(p string, stdio bool, headers map[string]string, ps *problems) {
	if a.Headers == nil && a.OAuth == nil && a.TokenExchange == nil {
		return
	}
	if stdio {
		ps.add(p, "only applies to url (HTTP) upstreams: give a stdio server its secrets in env")
		return
	}
	bearer := a.OAuth != nil || a.TokenExchange != nil
	if a.OAuth != nil && a.TokenExchange != nil {
		ps.add(p, "has both oauth and token_exchange: set one")
	}
	for _, k := range sortedKeys(headers) {
		hp := strings.TrimSuffix(p, ".auth") + ".headers" + keyPath(k)
		if bearer && strings.EqualFold(k, "Authorization") {
			ps.add(hp, "may not be set with auth.oauth or auth.token_exchange, which send Authorization")
		}
		for name := range a.Headers {
			if strings.EqualFold(name, k) {
				ps.add(hp, "is also set in auth.headers: set it in one place")
			}
		}
	}
	names := make([]string, 0, len(a.Headers))
	for k := range a.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		hp := p + ".headers" + keyPath(k)
		switch {
		case !isToken(k):
			ps.add(hp, "is not a valid HTTP header name")
		case bearer && strings.EqualFold(k, "Authorization"):
			ps.add(hp, "may not be set with oauth or token_exchange, which send Authorization")
		case strings.ContainsAny(a.Headers[k].Prefix, "\r\n\x00"):
			ps.add(hp+".prefix", "may not contain CR, LF or NUL")
		case strings.ContainsAny(a.Headers[k].Value, "\r\n\x00"):
			ps.add(hp+".env", "the variable's value may not contain CR, LF or NUL")
		}
	}
	if a.OAuth != nil {
		a.OAuth.validate(p+".oauth", ps, false)
	}
	if a.TokenExchange != nil {
		a.TokenExchange.validate(p+".token_exchange", ps, true)
	}
}

// validate checks an upstream's oauth or token_exchange at key path p.
func (o *OAuthClient) validate(p string, ps *problems, exchange bool) {
	switch {
	case o.TokenURL == "":
		ps.add(p+".token_url", "is required: the authorization server's token endpoint")
	case !validHTTPURL(o.TokenURL):
		ps.add(p+".token_url", "must be an absolute https:// (or http://) URL")
	}
	if o.ClientID == "" {
		ps.add(p+".client_id", "is required")
	}
	if o.ClientSecret == (Secret{}) {
		ps.add(p+".client_secret", "is required: {env: VAR} or {file: PATH}")
	}
	validateScopes(ps, p+".scopes", o.Scopes)
	if o.Resource != "" {
		if u, err := url.Parse(o.Resource); err != nil || !u.IsAbs() || u.Host == "" || strings.Contains(o.Resource, "#") {
			ps.add(p+".resource", "must be an absolute URL without a fragment (RFC 8707), such as https://crm.example.com/mcp")
		}
	}
	if exchange && o.Resource == "" && o.Audience == "" {
		ps.add(p, "needs resource or audience: the exchanged token must be meant for this upstream, not the gateway")
	}
}

// valid reports whether m is a mode a view can have.
func (m ViewMode) valid() bool { return m == ModeFull || m == ModeSearch || m == ModeAuto }
