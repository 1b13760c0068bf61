package config

import (
	"fmt"
	"net"
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
}

// ConsoleOn reports whether the console is served: console.enabled, or
// by default when the listener is loopback only.
func (c *Config) ConsoleOn() bool {
	if c.Console.Enabled != nil {
		return *c.Console.Enabled
	}
	return IsLoopback(c.Listen)
}

// IsAdmin reports whether a caller of team is a console admin
// (auth.admins names its team). Without authentication every visitor
// of the console is one: it is then served on loopback only.
func (c *Config) IsAdmin(team string) bool {
	if c.Auth.Mode == AuthNone {
		return true
	}
	return team != "" && slices.Contains(c.Auth.Admins, team)
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
