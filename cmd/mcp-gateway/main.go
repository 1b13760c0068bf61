// Command mcp-gateway serves many MCP servers behind one Streamable HTTP
// endpoint (or over stdio), for hosts of both protocol eras.
//
// Usage:
//
//	mcp-gateway [serve] [--config gateway.yaml] [--listen ADDR]
//	mcp-gateway stdio [--config F] [--team T] [--profile P]
//	mcp-gateway validate [--config F]
//	mcp-gateway tools [--config F] [--team T] [--profile P] [--mode full|search|auto] [--json]
//	mcp-gateway pin [--config F] [--check | --approve [--by WHO] NAME... | --export [--output F]]
//	mcp-gateway status [--config F | --url U] [--json] [--timeout D]
//	mcp-gateway version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // a runtime failure, or an invalid config
	exitUsage = 2 // bad command line
)

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("mcp-gateway "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "gateway.yaml", "path of the config file (gateway.yaml, or a claude_desktop_config.json)")
	var listen, team, profile, mode *string
	var asJSON, approve, check, export *bool
	var output *string
	var by, statusURL *string
	var timeout *time.Duration
	switch cmd {
	case "serve":
		listen = fs.String("listen", "", "address to listen on, host:port (overrides the config's listen)")
	case "tools":
		asJSON = fs.Bool("json", false, "print JSON instead of a table")
		team = fs.String("team", "", "show the catalog of this team's view (default: the policy view)")
		profile = fs.String("profile", "", "show the view as served on this profile's path, <endpoint>/<profile> (default: the endpoint's)")
		mode = fs.String("mode", "", "list the view as in this mode: full, search or auto (default: the view's configured mode)")
	case "stdio":
		team = fs.String("team", "", "serve this team's view (default: the policy view)")
		profile = fs.String("profile", "", "serve the view of this profile's path (default: the endpoint's)")
	case "pin":
		approve = fs.Bool("approve", false, "record the live definitions of the NAMEs given as approved, leaving the rest of the lockfile as it is")
		check = fs.Bool("check", false, "compare the live definitions with the lockfile; exit 1 and print the differences if any")
		by = fs.String("by", approver(), "who approves, recorded in the lockfile (default: the user running the command)")
		export = fs.Bool("export", false, "write the lockfile in force (the file, with the approvals shared in Redis under state.store redis) to stdout or --output")
		output = fs.String("output", "", "with --export, write to this file instead of stdout")
	case "status":
		statusURL = fs.String("url", "", "the gateway's URL, its base or its /readyz (default: the config's listen address, https when it sets tls)")
		asJSON = fs.Bool("json", false, "print the /readyz JSON instead of tables")
		timeout = fs.Duration("timeout", defaultStatusTimeout, "how long to wait for the gateway's answer")
	case "validate":
	case "version":
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case "help":
		usage(stdout)
		return exitOK
	default:
		fmt.Fprintf(stderr, "mcp-gateway: unknown command %q\n", cmd)
		usage(stderr)
		return exitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 && (cmd != "pin" || !*approve) {
		fmt.Fprintf(stderr, "mcp-gateway %s: unexpected argument %q\n", cmd, fs.Arg(0))
		return exitUsage
	}
	if cmd == "status" && *statusURL != "" {
		// The gateway is named: the config is not read.
		return statusCommand(ctx, statusArgs{url: *statusURL, asJSON: *asJSON, timeout: *timeout}, stdout, stderr)
	}

	cfg, err := loadConfig(*configPath, stderr)
	if err != nil {
		if cmd == "status" {
			fmt.Fprintln(stderr, "mcp-gateway status: the gateway to ask is the config's; give --url to name it instead")
		}
		return exitError
	}
	switch cmd {
	case "validate":
		if !validLockfile(*configPath, cfg, stderr) {
			return exitError
		}
		fmt.Fprintf(stdout, "%s: ok (%d upstreams)\n", *configPath, len(cfg.Upstreams))
		return exitOK
	case "serve":
		if *listen != "" {
			cfg.Listen = *listen
		}
		return serve(ctx, *configPath, cfg, stderr)
	case "stdio":
		return serveStdio(ctx, cfg, *team, *profile, stdin, stdout, stderr)
	case "tools":
		return listTools(ctx, cfg, *team, *profile, config.ViewMode(*mode), *asJSON, stdout, stderr)
	case "pin":
		return pinCommand(ctx, *configPath, cfg, pinArgs{approve: *approve, check: *check, export: *export, output: *output, by: *by, names: fs.Args()}, stdout, stderr)
	case "status":
		return statusCommand(ctx, statusArgs{cfg: cfg, asJSON: *asJSON, timeout: *timeout}, stdout, stderr)
	}
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  mcp-gateway [serve] [--config gateway.yaml] [--listen ADDR]   run the gateway (default)
  mcp-gateway stdio [--config F] [--team T] [--profile P]       serve the catalog over stdin/stdout
  mcp-gateway validate [--config F]                             check the config; every problem on its own line
  mcp-gateway tools [--config F] [--team T] [--json]            start the upstreams, print the catalog and its tokens
                    [--mode full|search|auto]                   and what tools/list costs in the view's mode (or this one),
                    [--profile P]                               on the endpoint or on a profile's path
  mcp-gateway pin [--config F] [--check]                        start the upstreams, write (or check) the lockfile of definitions
  mcp-gateway pin --approve [--by WHO] NAME...                  accept the live definitions of NAMEs into the lockfile (into Redis under state.store redis)
  mcp-gateway pin --export [--output F]                         write the lockfile in force: the file with the shared approvals
  mcp-gateway status [--config F | --url U] [--json]            print a running gateway's /readyz as tables; exit 1
                     [--timeout D]                              when it is not ready or cannot be read
  mcp-gateway version                                           print version information
`)
}
