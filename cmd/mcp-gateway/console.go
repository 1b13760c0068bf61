package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/console"
	"github.com/mcp-gateway/mcp-gateway/internal/pin"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// consoleAuth is how the console's visitors authenticate under cfg: with
// the MCP endpoint's credentials, admins being the callers of the teams
// auth.admins names.
func consoleAuth(cfg *config.Config, auth *authn) console.Auth {
	admins := slices.Clone(cfg.Auth.Admins)
	return console.Auth{
		Identify: auth.identify,
		Admin:    func(id policy.Identity) bool { return id.Team != "" && slices.Contains(admins, id.Team) },
	}
}

// consoleApprove accepts, for the console, the definition an admin was
// shown: it must still be listed with the hash the page showed (else
// nothing is approved: the admin reviews the new change). As pin
// --approve does, the approval goes into the shared store under
// state.store redis (every replica applies it), else into the lockfile;
// the catalog is rebuilt before the answer, so that hosts see the
// definition again when the admin sees the approval.
func (g *gateway) consoleApprove(ctx context.Context, a console.Approval) error {
	var def *pin.Def
	for _, d := range g.router.Definitions() {
		if string(d.Kind) == a.Kind && d.Upstream == a.Upstream && d.Display() == a.Name {
			def = &d
			break
		}
	}
	if def == nil {
		return console.ErrGone
	}
	if h, err := pin.Hash(def.Raw); err != nil || h != a.SHA256 {
		return console.ErrChangedAgain
	}
	g.consoleMu.Lock()
	defer g.consoleMu.Unlock()
	log := g.rec.log
	now := time.Now().UTC().Truncate(time.Second)
	file, err := pin.ReadLock(g.lockfile)
	if err != nil && !errors.Is(err, pin.ErrNoLockfile) {
		return fmt.Errorf("reading the lockfile: %w", err)
	}
	if store := g.shared.store; store != nil {
		g.approvalsMu.Lock()
		prev := pin.Overlay(file, g.approvals)
		g.approvalsMu.Unlock()
		_, approved, err := pin.Approve(prev, []pin.Def{*def}, []string{def.Display()}, a.By, now)
		if err != nil {
			return err
		}
		if err := storeApprovals(ctx, store, approved); err != nil {
			return fmt.Errorf("recording in Redis (state.store redis): %w", err)
		}
		g.applyApprovals(log)
		return nil
	}
	next, _, err := pin.Approve(file, []pin.Def{*def}, []string{def.Display()}, a.By, now)
	if err != nil {
		return err
	}
	if err := pin.WriteLock(g.lockfile, next); err != nil {
		return fmt.Errorf("writing the lockfile: %w", err)
	}
	g.reloadLock(log)
	return nil
}
