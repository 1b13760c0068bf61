package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/pin"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/state"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// newGuard builds the pinning guard of cfg; nil when pinning is off.
// Under mode enforce the lockfile must exist; under warn a missing one
// is a warning (every definition is then new).
func newGuard(cfg *config.Config, log *slog.Logger) (*pin.Guard, error) {
	p := cfg.Pinning
	if p == nil {
		return nil, nil
	}
	lock, err := pin.ReadLock(p.Lockfile)
	if err != nil {
		if !errors.Is(err, pin.ErrNoLockfile) || p.Mode == config.PinEnforce {
			return nil, fmt.Errorf("pinning: %w", err)
		}
		telemetry.Discard(log).Warn("pinning: no lockfile yet (run mcp-gateway pin)", "lockfile", p.Lockfile)
	}
	return pin.NewGuard(lock, pin.Options{
		Mode:                 pin.Mode(p.Mode),
		QuarantineNew:        p.NewTools == config.NewToolsQuarantine,
		QuarantineSuspicious: p.Suspicious == config.SuspiciousQuarantine,
		Logger:               log,
	}), nil
}

// reloadLock reads the lockfile again into the guard and rebuilds the
// catalog (a reload, SIGHUP, or the file changed). A lockfile that does
// not read keeps the lock in force.
func (g *gateway) reloadLock(log *slog.Logger) {
	if g.guard == nil {
		return
	}
	// Held while the lock is made and set, so that of two at once (a
	// SIGHUP, an approval) the later approvals win.
	g.approvalsMu.Lock()
	lock, err := pin.ReadLock(g.lockfile)
	if err != nil {
		g.approvalsMu.Unlock()
		log.Error("lockfile reload rejected: the lock in force stays", "lockfile", g.lockfile, telemetry.KeyErr, err)
		return
	}
	g.guard.SetLock(pin.Overlay(lock, g.approvals))
	g.approvalsMu.Unlock()
	g.router.Rebuild()
}

// sharedReadTimeout bounds a read of the shared approvals.
const sharedReadTimeout = 5 * time.Second

// applyApprovals reads the approvals shared in Redis (state.store redis)
// and applies them over the lockfile, rebuilding the catalog: at start,
// and when pin --approve tells the replicas. Redis down, the approvals
// already applied stay.
func (g *gateway) applyApprovals(log *slog.Logger) {
	if g.guard == nil || g.shared == nil || g.shared.store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedReadTimeout)
	defer cancel()
	approvals, err := sharedApprovals(ctx, g.shared.store, log)
	if err != nil {
		log.Error("cannot read the shared approvals: those applied stay", telemetry.KeyErr, err)
		return
	}
	g.approvalsMu.Lock()
	g.approvals = approvals
	g.approvalsMu.Unlock()
	g.reloadLock(log)
}

// applySharedOnce applies the approvals shared in Redis (state.store
// redis) to guard, once: for mcp-gateway tools and stdio, which do not
// hear of later ones. Redis down, the lockfile alone applies, with a
// warning.
func applySharedOnce(ctx context.Context, cfg *config.Config, guard *pin.Guard, log *slog.Logger) {
	if guard == nil || cfg.State.Store != config.StoreRedis {
		return
	}
	store, err := openShared(cfg, log)
	if err != nil {
		log.Warn("cannot read the shared approvals: the lockfile alone applies", telemetry.KeyErr, err)
		return
	}
	defer store.Close()
	rctx, cancel := context.WithTimeout(ctx, sharedReadTimeout)
	defer cancel()
	shared, err := sharedApprovals(rctx, store, log)
	if err != nil {
		log.Warn("cannot read the shared approvals: the lockfile alone applies", telemetry.KeyErr, err)
		return
	}
	lock, err := pin.ReadLock(cfg.Pinning.Lockfile)
	if err != nil && !errors.Is(err, pin.ErrNoLockfile) {
		return // newGuard read it a moment ago; the lock it made stays
	}
	guard.SetLock(pin.Overlay(lock, shared))
}

// sharedApprovals reads the entries pin --approve recorded in the store.
// One that does not decode, or names another definition than its field,
// is left out with a warning (the store already refused what is not
// sealed with state.key).
func sharedApprovals(ctx context.Context, store *state.Store, log *slog.Logger) ([]pin.Entry, error) {
	raw, err := store.Approvals(ctx)
	if err != nil {
		return nil, err
	}
	var out []pin.Entry
	for _, field := range slices.Sorted(maps.Keys(raw)) {
		var e pin.Entry
		if err := json.Unmarshal(raw[field], &e); err != nil || e.ID() != field {
			telemetry.Discard(log).Warn("ignored a shared approval that does not read", "field", field)
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// storeApprovals records approved in the store and tells every replica.
func storeApprovals(ctx context.Context, store *state.Store, approved []pin.Entry) error {
	m := make(map[string][]byte, len(approved))
	for _, e := range approved {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		m[e.ID()] = b
	}
	return store.Approve(ctx, m)
}

// openShared opens cfg's shared store for a pin command; nil under
// state.store memory.
func openShared(cfg *config.Config, log *slog.Logger) (*state.Store, error) {
	if cfg.State.Store != config.StoreRedis {
		return nil, nil
	}
	st, err := newSharedState(cfg, log)
	if err != nil {
		return nil, err
	}
	return st.store, nil
}

// observePinning registers pinning's gauge and counter.
func observePinning(obs *telemetry.Observer, guard *pin.Guard) error {
	if obs == nil || guard == nil {
		return nil
	}
	return obs.ObservePinning(func() map[string]int64 {
		out := map[string]int64{}
		for _, s := range guard.Report().Quarantined {
			out[string(s.Kind)]++
		}
		return out
	}, guard.Changes)
}

// lockfileOf is the lockfile cfg (loaded from configPath) names, or the
// default beside the config file when it has no pinning.
func lockfileOf(configPath string, cfg *config.Config) string {
	if cfg.Pinning != nil {
		return cfg.Pinning.Lockfile
	}
	dir := filepath.Dir(configPath)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return config.DefaultPinning(dir).Lockfile
}

// approver is who runs the command: $USER, else the account's name.
func approver() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// validLockfile checks, for mcp-gateway validate, the lockfile the
// gateway would read at start: under mode enforce one that is missing or
// does not read is a problem (the gateway would not start), under warn a
// warning.
func validLockfile(configPath string, cfg *config.Config, w io.Writer) bool {
	p := cfg.Pinning
	if p == nil {
		return true
	}
	_, err := pin.ReadLock(p.Lockfile)
	switch {
	case err == nil:
		return true
	case p.Mode == config.PinEnforce:
		fmt.Fprintf(w, "%s: pinning.lockfile: %v\n", configPath, err)
		return false
	}
	fmt.Fprintf(w, "warning: %s: pinning.lockfile: %v\n", configPath, err)
	return true
}

type pinArgs struct {
	approve, check, export bool
	by, output             string
	names                  []string
}

// pinCommand starts the upstreams and writes the lockfile of their live
// definitions (pin), accepts some of them into it (pin --approve), or
// compares them with it (pin --check).
func pinCommand(ctx context.Context, configPath string, cfg *config.Config, a pinArgs, stdout, stderr io.Writer) int {
	log := newLogger(cfg, stderr)
	lockfile := lockfileOf(configPath, cfg)
	switch {
	case a.approve && a.check, a.export && (a.approve || a.check):
		fmt.Fprintln(stderr, "mcp-gateway pin: --approve, --check and --export do not go together")
		return exitUsage
	case a.output != "" && !a.export:
		fmt.Fprintln(stderr, "mcp-gateway pin: --output goes with --export")
		return exitUsage
	case a.approve && len(a.names) == 0:
		fmt.Fprintln(stderr, "mcp-gateway pin --approve: name the tools (prompts, resources, upstreams) to approve")
		return exitUsage
	case a.approve && a.by == "":
		fmt.Fprintln(stderr, "mcp-gateway pin --approve: say who approves with --by (no user name found)")
		return exitUsage
	}
	prev, err := pin.ReadLock(lockfile)
	if err != nil && (a.approve || a.check || !errors.Is(err, pin.ErrNoLockfile)) {
		fmt.Fprintf(stderr, "mcp-gateway pin: %v\n", err)
		return exitError
	}
	// Under state.store redis, approvals live in Redis and apply over
	// the file (which may be read-only): read first, so that a Redis that
	// does not answer fails before the upstreams start.
	store, err := openShared(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-gateway pin: %v\n", err)
		return exitError
	}
	if store != nil {
		defer store.Close()
		rctx, cancel := context.WithTimeout(ctx, sharedReadTimeout)
		shared, err := sharedApprovals(rctx, store, log)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "mcp-gateway pin: reading the shared approvals (state.store redis): %v\n", err)
			return exitError
		}
		prev = pin.Overlay(prev, shared)
	}
	if a.export {
		return pinExport(prev, a.output, stdout, stderr)
	}

	rt, err := newRouter(cfg, recorders{log: log}, nil, nil, nil, nil)
	if err != nil {
		log.Error("invalid upstream", telemetry.KeyErr, err)
		return exitError
	}
	stop := sync.OnceFunc(func() { _ = rt.Close() })
	defer stop()
	rt.Start(ctx)
	if err := rt.WaitStarted(ctx); err != nil {
		return exitError
	}
	defs, status := rt.Definitions(), rt.Status()
	// The upstreams are done with: stopped before the command writes,
	// so that their logs do not interleave with what it prints.
	stop()
	down := 0
	for _, s := range status {
		if s.State != router.PhaseReady && s.State != router.PhaseDegraded {
			fmt.Fprintf(stderr, "upstream %s: %s: %s\n", s.Name, s.State, printable(s.Error, 0))
			down++
		}
	}
	if down > 0 && !a.check {
		// Its definitions would be missing from the lock, and new later.
		fmt.Fprintf(stderr, "mcp-gateway pin: %d upstream(s) not ready: the lockfile is left as it is\n", down)
		return exitError
	}
	for _, d := range defs {
		if why := pin.Suspicious(d.Raw); why != "" {
			fmt.Fprintf(stderr, "warning: %s %s of %s: suspicious: %s\n", d.Kind, printable(d.Display(), 0), d.Upstream, printable(why, 0))
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	switch {
	case a.check:
		return pinCheck(prev, defs, lockfile, down, stdout)
	case a.approve:
		next, approved, err := pin.Approve(prev, defs, a.names, a.by, now)
		if err != nil {
			fmt.Fprintf(stderr, "mcp-gateway pin --approve: %v\n", err)
			return exitError
		}
		if store != nil {
			if err := storeApprovals(ctx, store, approved); err != nil {
				fmt.Fprintf(stderr, "mcp-gateway pin --approve: recording in Redis (state.store redis): %v\n", err)
				return exitError
			}
			for _, e := range approved {
				fmt.Fprintf(stdout, "approved %s %s of %s (sha256 %.12s) by %s\n", e.Kind, printable(e.Display(), 0), e.Upstream, e.SHA256, printable(a.by, 0))
			}
			fmt.Fprintf(stdout, "recorded in Redis for every replica: %d approved (pin --export writes the lockfile to commit)\n", len(approved))
			return exitOK
		}
		if err := pin.WriteLock(lockfile, next); err != nil {
			fmt.Fprintf(stderr, "mcp-gateway pin: %v\n", err)
			return exitError
		}
		for _, e := range approved {
			fmt.Fprintf(stdout, "approved %s %s of %s (sha256 %.12s) by %s\n", e.Kind, printable(e.Display(), 0), e.Upstream, e.SHA256, printable(a.by, 0))
		}
		fmt.Fprintf(stdout, "wrote %s: %d approved\n", lockfile, len(approved))
		return exitOK
	}
	next, sum, err := pin.Pin(prev, defs, a.by, now)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-gateway pin: %v\n", err)
		return exitError
	}
	if err := pin.WriteLock(lockfile, next); err != nil {
		fmt.Fprintf(stderr, "mcp-gateway pin: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "wrote %s: %d definitions (%d added, %d changed, %d removed, %d unchanged)\n",
		lockfile, len(next.Entries), sum.Added, sum.Changed, sum.Removed, sum.Unchanged)
	return exitOK
}

// pinExport writes lock (the file with the shared approvals) to output,
// or stdout when "".
func pinExport(lock *pin.Lock, output string, stdout, stderr io.Writer) int {
	if lock == nil {
		lock = &pin.Lock{Version: pin.LockVersion}
	}
	if output != "" {
		if err := pin.WriteLock(output, lock); err != nil {
			fmt.Fprintf(stderr, "mcp-gateway pin --export: %v\n", err)
			return exitError
		}
		return exitOK
	}
	raw, err := lock.Marshal()
	if err == nil {
		_, err = stdout.Write(raw)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcp-gateway pin --export: %v\n", err)
		return exitError
	}
	return exitOK
}

// pinCheck prints how defs differ from the lock, and says exit 1 when
// they do (or carry suspicious text, or an upstream was down).
func pinCheck(lock *pin.Lock, defs []pin.Def, lockfile string, down int, stdout io.Writer) int {
	g := pin.NewGuard(lock, pin.Options{Mode: pin.ModeEnforce, QuarantineNew: true, QuarantineSuspicious: true})
	g.Vet(defs)
	rep := g.Report()
	for _, s := range rep.Quarantined {
		fmt.Fprintf(stdout, "%s %s %s of %s", s.Reason, s.Kind, printable(s.Name, 0), s.Upstream)
		if s.Detail != "" {
			fmt.Fprintf(stdout, ": %s", printable(s.Detail, 0))
		}
		fmt.Fprintln(stdout)
		if s.Diff != "" {
			fmt.Fprintln(stdout, s.Diff)
		}
	}
	removed := pin.Removed(lock, defs)
	for _, e := range removed {
		fmt.Fprintf(stdout, "removed %s %s of %s\n", e.Kind, printable(e.Display(), 0), e.Upstream)
	}
	if n := len(rep.Quarantined) + len(removed) + down; n > 0 {
		fmt.Fprintf(stdout, "%s: %d differences\n", lockfile, n)
		return exitError
	}
	fmt.Fprintf(stdout, "%s: %d definitions, as pinned\n", lockfile, len(defs))
	return exitOK
}
