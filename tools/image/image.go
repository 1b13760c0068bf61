// Command image writes the mcp-gateway container image as an OCI image
// layout, from a statically built binary, without docker and without a
// registry. CI builds and checks it (image_test.go); the repo's Dockerfile
// builds the same image with docker, and TestDockerfileInStep keeps the two
// in step.
//
//	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o mcp-gateway ./cmd/mcp-gateway
//	cd tools/image && GOWORK=off go run . -binary ../../mcp-gateway -out ../../image-layout
package main

import (
	"archive/tar"
	"bytes"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// defaultConfig is the image's /etc/mcp-gateway/gateway.yaml.
//
//go:embed gateway.yaml
var defaultConfig []byte

// The image's config. The Dockerfile at the repo root says the same
// (TestDockerfileInStep compares them).
const (
	binaryPath = "/mcp-gateway"
	configPath = "/etc/mcp-gateway/gateway.yaml"
	// user is distroless's "nonroot": no shell, no passwd entry needed.
	user = "65532:65532"
	// listen overrides any config's `listen` (loopback by default, which a
	// container's port mapping cannot reach).
	listenEnv = "MCP_GATEWAY_LISTEN=0.0.0.0:8080"
	port      = "8080/tcp"
)

var (
	entrypoint = []string{binaryPath}
	cmd        = []string{"serve", "--config", configPath}
	labels     = map[string]string{
		"org.opencontainers.image.source":   "https://github.com/mcp-gateway/mcp-gateway",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.title":    "mcp-gateway",
	}
)

// epoch is every file's modification time, so the same binary gives the same
// image digest.
var epoch = time.Unix(0, 0).UTC()

func main() {
	binary := flag.String("binary", "", "path of the statically built mcp-gateway binary (CGO_ENABLED=0)")
	out := flag.String("out", "", "directory to write the OCI image layout to (created; must not hold another layout)")
	flag.Parse()
	if *binary == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: image -binary mcp-gateway -out DIR")
		os.Exit(2)
	}
	if err := run(*binary, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(binary, out string) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	img, err := buildImage(bin, runtime.GOARCH)
	if err != nil {
		return err
	}
	return writeLayout(out, img)
}

// buildImage assembles the image: one layer holding exactly the binary,
// one holding the default config, and the config below.
func buildImage(bin []byte, arch string) (v1.Image, error) {
	if len(bin) < 4 || !bytes.Equal(bin[:4], []byte("\x7fELF")) {
		return nil, errors.New("binary: not an ELF executable")
	}
	binLayer, err := tarLayer(tarFile{binaryPath, 0o555, bin})
	if err != nil {
		return nil, fmt.Errorf("binary layer: %w", err)
	}
	cfgLayer, err := tarLayer(tarFile{configPath, 0o444, defaultConfig})
	if err != nil {
		return nil, fmt.Errorf("config layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, binLayer, cfgLayer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		User:         user,
		Entrypoint:   entrypoint,
		Cmd:          cmd,
		Env:          []string{listenEnv},
		ExposedPorts: map[string]struct{}{port: {}},
		Labels:       labels,
		WorkingDir:   "/",
	}
	return mutate.ConfigFile(img, cf)
}

type tarFile struct {
	path string
	mode int64
	body []byte
}

// tarLayer makes a gzipped OCI layer of the files (with entries for their
// parent directories), owned by root: the image's user only reads and runs
// them.
func tarLayer(files ...tarFile) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	for _, f := range files {
		for _, dir := range parents(f.path[1:]) {
			if seen[dir] {
				continue
			}
			seen[dir] = true
			if err := tw.WriteHeader(&tar.Header{
				Typeflag: tar.TypeDir,
				Name:     dir + "/",
				Mode:     0o755,
				ModTime:  epoch,
				Format:   tar.FormatPAX,
			}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.path[1:], // layer paths are relative to the root
			Mode:     f.mode,
			Size:     int64(len(f.body)),
			ModTime:  epoch,
			Format:   tar.FormatPAX,
		}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// parents lists the directories above a relative path, outermost first:
// "etc/mcp-gateway/gateway.yaml" gives "etc", "etc/mcp-gateway".
func parents(path string) []string {
	var dirs []string
	for i := range len(path) {
		if path[i] == '/' {
			dirs = append(dirs, path[:i])
		}
	}
	return dirs
}

// writeLayout writes img as the only image of a new OCI image layout in dir,
// tagged latest (skopeo copy oci:DIR:latest ...) with its platform in the
// index.
func writeLayout(dir string, img v1.Image) error {
	if _, err := os.Stat(dir + "/index.json"); err == nil {
		return fmt.Errorf("%s: already holds an image layout", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	return p.AppendImage(img,
		layout.WithPlatform(v1.Platform{OS: cf.OS, Architecture: cf.Architecture}),
		layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "latest"}))
}
