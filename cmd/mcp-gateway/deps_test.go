package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// allowedImports is the package map of DESIGN.md section 5: which internal
// packages each package may import (non-test files). Third-party
// dependencies that belong to one package are listed too: only config
// reads YAML, only server uses gorilla/mux, only upstream talks to the SDK
// at run time.
var allowedImports = map[string][]string{
	"config":    {},
	"jsonrpc":   {},
	"mcpheader": {"jsonrpc"},
	"namespace": {},
	"policy":    {"namespace", "config", "jsonrpc"},
	"telemetry": {},
	"upstream":  {"jsonrpc", "config", "telemetry", "mcpheader"},
	"state":     {"config", "telemetry"},
	"search":    {},
	"pin":       {"jsonrpc"},
	"router":    {"upstream", "namespace", "policy", "search", "jsonrpc", "mcpheader", "config", "state", "pin"},
	"server":    {"router", "jsonrpc", "policy", "telemetry", "mcpheader", "config", "state"},
	"console":   {"router", "policy", "jsonrpc", "telemetry"},
	"mcptest":   {"jsonrpc"},
}

// ownedImports names third-party imports that only one package may use.
// Only telemetry builds OpenTelemetry providers and exporters; the others
// use the otel API (trace, metric, attribute, propagation) on what it
// passes them.
var ownedImports = map[string]string{
	"github.com/gorilla/mux":             "server",
	"go.yaml.in/yaml/v3":                 "config",
	"github.com/sony/gobreaker":          "upstream",
	"go.opentelemetry.io/otel/sdk":       "telemetry",
	"go.opentelemetry.io/otel/exporters": "telemetry",
	"go.opentelemetry.io/proto":          "telemetry",
	"github.com/prometheus/":             "telemetry",
	// Only policy verifies tokens (oauth.go).
	"github.com/coreos/go-oidc/":  "policy",
	"github.com/go-jose/go-jose/": "policy",
	// Only state talks to Redis.
	"github.com/redis/go-redis/": "state",
}

// globalOtel is the otel package of the global providers and propagator
// (otel.Tracer, otel.SetTracerProvider, ...), which no package may use:
// telemetry builds providers and passes them in.
const globalOtel = "go.opentelemetry.io/otel"

func TestDeps(t *testing.T) {
	const module = "github.com/mcp-gateway/mcp-gateway/internal/"
	dirs, err := os.ReadDir("../../internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		pkg := d.Name()
		allowed, known := allowedImports[pkg]
		if !known {
			t.Errorf("internal/%s is not in the package map: add it to DESIGN.md, the README and allowedImports", pkg)
			continue
		}
		files, _ := filepath.Glob(filepath.Join("../../internal", pkg, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range ast.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				if dep, ok := strings.CutPrefix(path, module); ok {
					if !slices.Contains(allowed, dep) {
						t.Errorf("%s imports internal/%s, which the package map does not allow", f, dep)
					}
				}
				if path == globalOtel {
					t.Errorf("%s imports %s: pass providers in instead of using the global ones", f, path)
				}
				for prefix, owner := range ownedImports {
					if strings.HasPrefix(path, prefix) && owner != pkg {
						t.Errorf("%s imports %s, which only internal/%s may use", f, path, owner)
					}
				}
			}
		}
	}
}
