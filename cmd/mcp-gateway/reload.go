package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
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

// watchConfig reloads the gateway when its config file changes (a file
// watch on its folder, so that editors that replace the file are seen)
// or on SIGHUP, until ctx is done. A config with problems is rejected
// with each problem logged, and the running config stays.
func (g *gateway) watchConfig(ctx context.Context, path string, current *config.Config, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	var events <-chan fsnotify.Event
	if w, err := fsnotify.NewWatcher(); err != nil {
		log.Warn("config file watch unavailable: reload with SIGHUP", telemetry.KeyErr, err)
	} else {
		defer w.Close()
		if err := w.Add(filepath.Dir(path)); err != nil {
			log.Warn("config file watch unavailable: reload with SIGHUP", telemetry.KeyErr, err)
		} else {
			events = w.Events
		}
	}
	name := filepath.Clean(path)
	var debounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			current = g.reload(path, current, log)
		case ev := <-events:
			if filepath.Clean(ev.Name) == name && ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) != 0 {
				debounce = time.After(reloadDebounce)
			}
		case <-debounce:
			debounce = nil
			current = g.reload(path, current, log)
		}
	}
}

// reload applies the config file's new contents and returns the config
// in force afterwards.
func (g *gateway) reload(path string, current *config.Config, log *slog.Logger) *config.Config {
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
	auth, err := identify(next)
	if err != nil {
		log.Error("config reload rejected", "problem", err.Error())
		return current
	}
	if err := g.router.Reconfigure(routerOptions(next, log, g.onChange)); err != nil {
		log.Error("config reload rejected", telemetry.KeyErr, err)
		return current
	}
	g.server.SetIdentify(auth)
	return next
}
