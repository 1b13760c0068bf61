package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// buildGateway builds the gateway as the Dockerfile does: static, trimmed.
func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcp-gateway")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/mcp-gateway")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// readLayout reads back the only image of the OCI image layout in dir.
func readLayout(t *testing.T, dir string) v1.Image {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("layout holds %d manifests, want 1", len(im.Manifests))
	}
	if d := im.Manifests[0]; d.Platform == nil || d.Platform.OS != "linux" || d.Annotations["org.opencontainers.image.ref.name"] != "latest" {
		t.Errorf("index entry: platform %v, annotations %v; want linux and ref.name latest", d.Platform, d.Annotations)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// layerFiles returns a layer's regular files by path, and its other entries'
// paths (which must be directories).
func layerFiles(t *testing.T, l v1.Layer) (files map[string][]byte, dirs []string) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files = map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, dirs
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		case tar.TypeDir:
			dirs = append(dirs, h.Name)
		default:
			t.Fatalf("layer entry %q has type %q, want a file or directory", h.Name, h.Typeflag)
		}
	}
}

// TestImage builds the image from the static binary, reads it back and
// checks it, then runs the binary taken from the image with the image's
// entrypoint, arguments and environment, and asks it for /healthz.
func TestImage(t *testing.T) {
	bin := buildGateway(t)
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	if err := run(bin, dir); err != nil {
		t.Fatal(err)
	}
	img := readLayout(t, dir)

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	uid, gid, ok := strings.Cut(cf.Config.User, ":")
	if !ok || uid == "0" || gid == "0" || uid == "" || gid == "" || uid == "root" {
		t.Errorf("user %q, want a numeric non-root uid:gid", cf.Config.User)
	}
	if diff := cmp.Diff([]string{"/mcp-gateway"}, cf.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	for _, k := range []string{"org.opencontainers.image.source", "org.opencontainers.image.licenses", "org.opencontainers.image.title"} {
		if cf.Config.Labels[k] == "" {
			t.Errorf("label %s is missing", k)
		}
	}
	if _, ok := cf.Config.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("exposed ports %v, want 8080/tcp", cf.Config.ExposedPorts)
	}
	if !slices.Contains(cf.Config.Env, "MCP_GATEWAY_LISTEN=0.0.0.0:8080") {
		t.Errorf("env %q, want MCP_GATEWAY_LISTEN=0.0.0.0:8080 (the gateway's default listen is loopback)", cf.Config.Env)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 2 {
		t.Fatalf("%d layers, want 2 (the binary, the default config)", len(layers))
	}
	files, dirs := layerFiles(t, layers[0])
	if len(files) != 1 || len(dirs) != 0 || !bytes.Equal(files["mcp-gateway"], want) {
		names := slices.Sorted(func(yield func(string) bool) {
			for k := range files {
				if !yield(k) {
					return
				}
			}
		})
		t.Fatalf("binary layer holds files %q and directories %q, want exactly mcp-gateway, the built binary", names, dirs)
	}
	cfgFiles, _ := layerFiles(t, layers[1])
	if len(cfgFiles) != 1 || !bytes.Equal(cfgFiles["etc/mcp-gateway/gateway.yaml"], defaultConfig) {
		t.Fatalf("config layer holds %d files, want exactly etc/mcp-gateway/gateway.yaml", len(cfgFiles))
	}

	// Extract the image's files, and check the binary needs no loader or
	// libraries (the image has none).
	root := t.TempDir()
	for _, m := range []map[string][]byte{files, cfgFiles} {
		for name, b := range m {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o555); err != nil {
				t.Fatal(err)
			}
		}
	}
	ef, err := elf.Open(filepath.Join(root, "mcp-gateway"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary is dynamically linked (%v), a FROM scratch image cannot run it", p.Type)
		}
	}
	ef.Close()

	// Run it as the image would, with the image's root at root. The
	// listen address keeps the image's host (every interface) on a free
	// port: 8080 may be taken on this machine.
	port := freePort(t)
	args := slices.Concat(cf.Config.Entrypoint[1:], cf.Config.Cmd)
	for i, a := range args {
		if strings.HasPrefix(a, "/") {
			args[i] = filepath.Join(root, a)
		}
	}
	env := []string{}
	for _, e := range cf.Config.Env {
		if v, ok := strings.CutPrefix(e, "MCP_GATEWAY_LISTEN="); ok {
			host, _, err := net.SplitHostPort(v)
			if err != nil {
				t.Fatalf("MCP_GATEWAY_LISTEN=%q: %v", v, err)
			}
			e = "MCP_GATEWAY_LISTEN=" + net.JoinHostPort(host, port)
		}
		env = append(env, e)
	}
	var logs bytes.Buffer
	gw := exec.Command(filepath.Join(root, cf.Config.Entrypoint[0]), args...)
	gw.Env = env
	gw.Dir = root
	gw.Stdout, gw.Stderr = &logs, &logs
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- gw.Wait() }()
	defer func() {
		gw.Process.Signal(os.Interrupt)
		if err := <-exited; err != nil {
			t.Errorf("gateway exit: %v\n%s", err, logs.String())
		}
	}()

	// Polling on a real socket, with a deadline, until the gateway listens.
	url := "http://127.0.0.1:" + port + "/healthz"
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /healthz: %s", resp.Status)
			}
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("gateway exited before answering /healthz: %v\n%s", err, logs.String())
		case <-ctx.Done():
			t.Fatalf("GET /healthz: %v\n%s", err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func TestBuildImageRefusesNonELF(t *testing.T) {
	if _, err := buildImage([]byte("#!/bin/sh\n"), "amd64"); err == nil {
		t.Fatal("a shell script became an image")
	}
}

// TestDockerfileInStep checks that the Dockerfile's final stage declares
// the image this tool writes.
func TestDockerfileInStep(t *testing.T) {
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := v1.Config{Labels: map[string]string{}, ExposedPorts: map[string]struct{}{}}
	var copies []string
	stage := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, arg, _ := strings.Cut(line, " ")
		arg = strings.TrimSpace(arg)
		if strings.EqualFold(instr, "FROM") {
			stage = arg
			continue
		}
		if stage != "scratch" {
			continue
		}
		switch strings.ToUpper(instr) {
		case "USER":
			got.User = arg
		case "ENTRYPOINT":
			got.Entrypoint = jsonArray(t, line, arg)
		case "CMD":
			got.Cmd = jsonArray(t, line, arg)
		case "ENV":
			got.Env = append(got.Env, arg)
		case "EXPOSE":
			got.ExposedPorts[arg+"/tcp"] = struct{}{}
		case "LABEL":
			k, v, ok := strings.Cut(arg, "=")
			if !ok {
				t.Fatalf("%s: want LABEL key=\"value\"", line)
			}
			got.Labels[k] = strings.Trim(v, `"`)
		case "COPY":
			fields := strings.Fields(arg)
			copies = append(copies, fields[len(fields)-1])
		default:
			t.Errorf("%s: the final stage has an instruction the tool does not mirror", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if stage != "scratch" {
		t.Fatalf("the final stage is FROM %q, want scratch", stage)
	}
	img, err := buildImage([]byte("\x7fELF"), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := cf.Config
	want.WorkingDir = "" // scratch's default, "/"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Dockerfile vs tools/image config (-tool +Dockerfile):\n%s", diff)
	}
	if diff := cmp.Diff([]string{binaryPath, configPath}, copies); diff != "" {
		t.Errorf("Dockerfile COPY destinations (-tool +Dockerfile):\n%s", diff)
	}
}

func jsonArray(t *testing.T, line, arg string) []string {
	t.Helper()
	var a []string
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		t.Fatalf("%s: want the exec (JSON array) form: %v", line, err)
	}
	return a
}

// TestDockerfileNodeInStep checks that Dockerfile.node runs the gateway as
// the image this tool writes does: same user, entrypoint, arguments and
// listen address.
func TestDockerfileNodeInStep(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile.node")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	// The exec form as the Dockerfiles write it: ["a", "b"].
	mustJSON := func(v []string) string {
		var parts []string
		for _, s := range v {
			j, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, string(j))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	for _, want := range []string{
		"USER " + user,
		"ENTRYPOINT " + mustJSON(entrypoint),
		"CMD " + mustJSON(cmd),
		"ENV " + listenEnv + " \\",
		"COPY --from=build /out/mcp-gateway " + binaryPath,
		"COPY tools/image/gateway.yaml " + configPath,
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("Dockerfile.node has no line %q", want)
		}
	}
}
