package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// The operator console (console:, served at ConsolePath).
const (
	// ConsolePath is where the console is served, beside the MCP
	// endpoint.
	ConsolePath = "/ui"
	// DefaultRecentCalls is how many calls the console remembers;
	// MaxRecentCalls the most console.recent_calls may be.
	DefaultRecentCalls = 200
	MaxRecentCalls     = 10000
)

// Console configures the operator console at /ui: server-rendered pages
// of the upstreams, the views and what their limits cut, what pinning
// quarantined (with approval), and the recent calls.
type Console struct {
	// Enabled turns the console on or off. Key: enabled. Default: on
	// when the gateway listens on loopback only, off otherwise (nil).
	Enabled *bool
	// RecentCalls is how many calls the console remembers (time, view,
	// tool, upstream, duration, outcome; never arguments or results), in
	// memory, per replica. Key: recent_calls. Default 200, at most 10000.
	RecentCalls int
	// Origin is the console's public origin when a proxy in front of the
	// gateway terminates TLS, such as https://gw.example.com: browsers
	// name it in Origin, and an https origin makes the session cookie
	// Secure. Key: origin. Default: the origin the gateway serves.
	Origin string
}

// NormalOrigin is an origin as browsers serialize it: scheme and host in
// lower case, without the scheme's default port (https://GW.example.com:443
// is https://gw.example.com); s unchanged when it is not an origin.
func NormalOrigin(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return s
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname())
	port := u.Port()
	if scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	out := scheme + "://" + host
	if port != "" {
		out += ":" + port
	}
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return s // not an origin: validation says so
	}
	return out
}

// ConsoleSecure reports whether browsers reach the console over HTTPS:
// the gateway's own TLS, or an https console.origin.
func (c *Config) ConsoleSecure() bool {
	return c.TLS != nil || strings.HasPrefix(c.Console.Origin, "https://")
}

// ConsoleOn reports whether the console is served: console.enabled, or
// by default when the listener is loopback only.
func (c *Config) ConsoleOn() bool {
	if c.Console.Enabled != nil {
		return *c.Console.Enabled
	}
	return IsLoopback(c.Listen)
}

// IsLoopback reports whether a listen address (host:port) is bound to
// loopback only: localhost, 127.0.0.0/8 or ::1. ":8080" and 0.0.0.0 are
// not.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c *Config) validateConsole(ps *problems) {
	if c.Console.RecentCalls < 0 || c.Console.RecentCalls > MaxRecentCalls {
		ps.add("console.recent_calls", "must be between 0 (the default, %d) and %d", DefaultRecentCalls, MaxRecentCalls)
	}
	if o := c.Console.Origin; o != "" && (!validOrigin(o) || strings.HasSuffix(o, "/")) {
		ps.add("console.origin", "must be an origin, scheme://host or scheme://host:port, such as https://gw.example.com")
	}
	for i, a := range c.Auth.Admins {
		if !slices.ContainsFunc(c.Teams, func(t Team) bool { return t.Name == a }) {
			ps.add(fmt.Sprintf("auth.admins[%d]", i), "names no team: %q (admins are teams: each caller of a listed team is a console admin)", a)
		}
	}
	if len(c.Auth.Admins) > 0 && c.Auth.Mode == AuthNone {
		ps.add("auth.admins", "set, but auth.mode is none: without authentication the console (loopback only) has no identities to tell apart")
	}
	if !c.ConsoleOn() {
		return
	}
	if c.Auth.Mode == AuthNone && !IsLoopback(c.Listen) {
		ps.add("console.enabled", "the console beyond loopback needs authentication (auth.mode api_key or oauth): with mode none anyone who reaches %s could approve changed tools", c.Listen)
	}
	if ep := c.Endpoint; ep == ConsolePath || strings.HasPrefix(ep, ConsolePath+"/") {
		ps.add("endpoint", "%s is the console's path: choose another endpoint or set console.enabled: false", ConsolePath)
	}
}
