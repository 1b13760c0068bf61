package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// reloadDebounce lets an editor finish writing the file (several events)
// before the gateway reads it.
const reloadDebounce = 250 * time.Millisecond

// reloadPoll is how often the config file is read for changes when the
// operating system's file watch is unavailable (out of inotify instances,
// say).
const reloadPoll = 2 * time.Second

// configWatch reloads the gateway when its config file's contents change
// or on SIGHUP. The file watch is on the file's folder, and any event
// there leads to a read of the file: editors replace the file rather
// than write it, and Kubernetes swaps a symlink (..data) beside it, so
// the event may not name the file at all. A reload happens only when the
// bytes differ from those last applied; SIGHUP always reloads.
type configWatch struct {
	path string
	// also are files whose changes reload too (the lockfile): their
	// bytes count in applied; a missing one counts as empty.
	also      []string
	log       *slog.Logger
	apply     func() // reads and applies the file; called from run only
	applied   [sha256.Size]byte
	hup       chan os.Signal
	watcher   *fsnotify.Watcher // nil: poll every pollEvery instead
	pollEvery time.Duration
}

// newConfigWatch starts listening for SIGHUP and file events at once, so
// that a change made as soon as the gateway is ready is not missed.
func newConfigWatch(path string, log *slog.Logger, apply func(), also ...string) *configWatch {
	cw := &configWatch{path: path, also: also, log: log, apply: apply, hup: make(chan os.Signal, 1), pollEvery: reloadPoll}
	if sum, err := cw.sum(); err == nil {
		cw.applied = sum
	}
	signal.Notify(cw.hup, syscall.SIGHUP)
	w, err := fsnotify.NewWatcher()
	if err == nil {
		dirs := []string{filepath.Dir(path)}
		for _, f := range also {
			if d := filepath.Dir(f); !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
		for _, d := range dirs {
			if err = w.Add(d); err != nil {
				w.Close()
				break
			}
		}
	}
	if err != nil {
		log.Warn("config file watch unavailable: polling the file instead", "every", reloadPoll, telemetry.KeyErr, err)
	} else {
		cw.watcher = w
	}
	return cw
}

// run reloads on changes until ctx is done, then releases the watch.
func (cw *configWatch) run(ctx context.Context) {
	defer signal.Stop(cw.hup)
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	var poll <-chan time.Time
	if cw.watcher != nil {
		defer cw.watcher.Close()
		events, watchErrs = cw.watcher.Events, cw.watcher.Errors
	} else {
		ticker := time.NewTicker(cw.pollEvery)
		defer ticker.Stop()
		poll = ticker.C
	}
	var debounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-cw.hup:
			cw.reload(true)
		case <-events:
			debounce = time.After(reloadDebounce)
		case err := <-watchErrs:
			// Events may have been dropped (queue overflow): read the file.
			cw.log.Warn("config file watch", telemetry.KeyErr, err)
			debounce = time.After(reloadDebounce)
		case <-poll:
			cw.reload(false)
		case <-debounce:
			debounce = nil
			cw.reload(false)
		}
	}
}

// sum is the hash of the config file's bytes and those of the other
// files watched.
func (cw *configWatch) sum() ([sha256.Size]byte, error) {
	raw, err := os.ReadFile(cw.path)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	h := sha256.New()
	h.Write(raw)
	for _, f := range cw.also {
		b, _ := os.ReadFile(f) // a missing lockfile counts as empty
		h.Write([]byte{0})
		h.Write(b)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out, nil
}

// reload applies the files if forced or if their bytes changed.
func (cw *configWatch) reload(force bool) {
	sum, err := cw.sum()
	if err != nil {
		cw.log.Error("config reload rejected", telemetry.KeyErr, err)
		return
	}
	if !force && sum == cw.applied {
		return
	}
	// A rejected file counts as seen: it is not re-read and re-rejected
	// at every event until it changes again.
	cw.applied = sum
	cw.apply()
}

// reload applies the config file's new contents and returns the config
// in force afterwards.
func (g *gateway) reload(path string, current *config.Config, log *slog.Logger) *config.Config {
	// The lockfile first, and whatever becomes of the config: an
	// approval applies even while the config has problems.
	g.reloadLock(log)
	var problems bytes.Buffer
	next, err := loadConfig(path, &problems)
	if err != nil {
		for _, line := range strings.Split(strings.TrimSpace(problems.String()), "\n") {
			log.Error("config reload rejected", "problem", line)
		}
		return current
	}
	if next.Listen != current.Listen || next.Endpoint != current.Endpoint {
		log.Warn("listen and endpoint changes take effect at the next start", "listen", current.Listen, "endpoint", current.Endpoint)
		next.Listen, next.Endpoint = current.Listen, current.Endpoint
	}
	// The shared store and its keys are opened once; the shutdown is the
	// one the gateway started with.
	if !reflect.DeepEqual(next.State, current.State) || next.Shutdown != current.Shutdown {
		log.Warn("state and shutdown changes take effect at the next start")
		next.State, next.Shutdown = current.State, current.Shutdown
	}
	// The listener's certificate files are watched on their own (a
	// renewed certificate needs no reload); switching TLS on or off, or
	// to other files, needs a new listener.
	if !reflect.DeepEqual(next.TLS, current.TLS) {
		log.Warn("tls changes take effect at the next start (renewed files at the same paths are picked up at once)")
		next.TLS = current.TLS
	}
	// The HTTP server's Origin and Host checks and the limits' buckets
	// are made once, at start.
	if !slices.Equal(next.AllowedOrigins, current.AllowedOrigins) || !slices.Equal(next.AllowedHosts, current.AllowedHosts) {
		log.Warn("allowed_origins and allowed_hosts changes take effect at the next start")
		next.AllowedOrigins, next.AllowedHosts = current.AllowedOrigins, current.AllowedHosts
	}
	if !reflect.DeepEqual(limitsOf(next), limitsOf(current)) {
		log.Warn("limits changes (limits, teams[].limits, tools.rate) take effect at the next start")
	}
	// The router's task table is made once, at start; tasks.after is
	// per upstream and applies (see fingerprint).
	if next.Tasks.TTL != current.Tasks.TTL || next.Tasks.MaxPerIdentity != current.Tasks.MaxPerIdentity {
		log.Warn("tasks.ttl and tasks.max_per_identity changes take effect at the next start")
		next.Tasks.TTL, next.Tasks.MaxPerIdentity = current.Tasks.TTL, current.Tasks.MaxPerIdentity
	}
	// The telemetry providers, the logger and the audit log are built
	// once, at start.
	if next.Telemetry != current.Telemetry {
		log.Warn("telemetry changes take effect at the next start")
		next.Telemetry = current.Telemetry
	}
	// The guard is made once, at start; its lockfile is re-read above.
	if !reflect.DeepEqual(next.Pinning, current.Pinning) {
		log.Warn("pinning changes take effect at the next start (the lockfile's contents apply at once)")
		next.Pinning = current.Pinning
	}
	if g.console != nil && next.Auth.Mode == config.AuthNone && !config.IsLoopback(current.Listen) {
		// The file was checked with its own listen address.
		log.Error("config reload rejected", "problem", "auth.mode none would open the console to whoever reaches "+current.Listen+": keep authentication, or set console.enabled: false and restart")
		return current
	}
	auth, err := newAuthn(next, log, g.auth)
	if err != nil {
		log.Error("config reload rejected", "problem", err.Error())
		return current
	}
	if err := g.router.Reconfigure(routerOptions(next, g.rec, g.onChange)); err != nil {
		log.Error("config reload rejected", telemetry.KeyErr, err)
		return current
	}
	// After the router has the profiles' views: a new profile's path
	// opens on views that exist.
	g.server.SetProfiles(profileNames(next))
	g.server.SetResourceMetadata(auth.meta)
	g.server.SetIdentify(auth.identify, auth.team)
	if g.console != nil {
		g.console.SetAuth(consoleAuth(next, auth))
	}
	if !reflect.DeepEqual(next.Console, current.Console) {
		log.Warn("console changes take effect at the next start (auth.admins applies at once)")
		next.Console = current.Console
	}
	g.auth = auth
	return next
}

// limitsOf gathers what of a config the limits are made of, to tell a
// reload that changes them.
func limitsOf(c *config.Config) []any {
	out := []any{c.Limits}
	for _, t := range c.Teams {
		out = append(out, t.Name, t.Limits)
	}
	for _, u := range c.Upstreams {
		out = append(out, u.Name, u.Tools.Rates)
	}
	return out
}
