// Package redistest starts a real redis-server for tests.
package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Binary returns the path of redis-server. Without one the test skips,
// so that go test ./... passes on a fresh clone, unless
// MCP_GATEWAY_TEST_PEERS=require (./test.sh, whose .ci/run installs
// Debian's redis-server), which makes it fail.
func Binary(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"redis-server", "/usr/bin/redis-server", "/usr/sbin/redis-server"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("MCP_GATEWAY_TEST_PEERS") == "require" {
		t.Fatal("redis-server is not installed (.ci/run installs Debian's redis-server)")
	}
	t.Skip("redis-server is not installed: run ./test.sh on a machine with Debian's redis-server (.ci/run installs it)")
	return ""
}

// Server is a redis-server the test started.
type Server struct {
	// URL is its redis:// URL.
	URL string
	// Addr is its host:port.
	Addr string
	cmd  *exec.Cmd
	dir  string
	args []string
	// tls, when set, is how the readiness check reaches a TLS server.
	tls *tls.Config
}

// Start starts a redis-server on a free loopback port, with nothing
// saved to disk, and stops it when the test ends. extra are more
// redis-server arguments (--requirepass PW).
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin := Binary(t)
	port := freePort(t)
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: t.TempDir()}
	s.URL = "redis://" + s.Addr + "/0"
	s.args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir}, extra...)
	s.start(t, bin)
	t.Cleanup(s.Stop)
	return s
}

// StartTLS starts a redis-server that speaks TLS only, with the
// certificate and key in these PEM files; roots verify it for the
// readiness check. Its URL is rediss://.
func StartTLS(t testing.TB, certFile, keyFile string, roots *x509.CertPool, extra ...string) *Server {
	t.Helper()
	bin := Binary(t)
	port := freePort(t)
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: t.TempDir(), tls: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	s.URL = "rediss://" + s.Addr + "/0"
	s.args = append([]string{"--port", "0", "--tls-port", strconv.Itoa(port), "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-auth-clients", "no", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir}, extra...)
	s.start(t, bin)
	t.Cleanup(s.Stop)
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *Server) start(t testing.TB, bin string) {
	t.Helper()
	s.cmd = exec.Command(bin, s.args...)
	log, err := os.Create(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		log.Close()
		t.Fatal(err)
	}
	log.Close()
	if err := s.await(10 * time.Second); err != nil {
		s.Stop()
		t.Fatalf("redis-server did not answer: %v", err)
	}
}

// await waits until the server answers PING.
func (s *Server) await(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		if err := ping(ctx, s.Addr, s.tls); err == nil {
			return nil
		} else if ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func ping(ctx context.Context, addr string, tlsConfig *tls.Config) error {
	var c net.Conn
	var err error
	if tlsConfig != nil {
		d := tls.Dialer{Config: tlsConfig}
		c, err = d.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Stop kills the server and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server again on the same port, empty.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.start(t, Binary(t))
}
