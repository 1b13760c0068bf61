// Command idp is a small OAuth 2.0 authorization server / OpenID Provider for
// mcp-gateway's tests, built on github.com/zitadel/oidc/v3. It is a test peer,
// not a product: it keeps everything in memory, speaks plain HTTP on the
// loopback interface, and has test-only endpoints that mint tokens and rotate
// keys without any authentication.
//
// Usage:
//
//	idp [-port N] [-client id:secret[:scope ...]]... [-audience URL]
//	    [-token-ttl 1h] [-keep-old-keys=true] [-watch-stdin=true]
//
// Once serving it prints one line on stdout, {"issuer":"http://127.0.0.1:PORT"},
// and it exits on SIGTERM or SIGINT, or when stdin reaches EOF (unless
// -watch-stdin=false), so a test that dies cannot leave it behind.
//
// It serves, under the issuer:
//
//	GET  /.well-known/openid-configuration  OIDC discovery
//	GET  /keys                              the JWKS (RS256 public keys)
//	POST /oauth/token                       client_credentials and RFC 8693
//	                                        token exchange, with RFC 8707 resource
//	POST /oauth/introspect                  RFC 7662 introspection (a client's
//	                                        credentials, HTTP Basic)
//	POST /test/token                        TEST-ONLY: a user's access token
//	POST /test/rotate                       TEST-ONLY: a new current signing key
//
// Access tokens are RS256 JWTs (iss, sub, aud, exp, iat, nbf, jti, client_id,
// scope, and groups where the user has any); /test/token also makes opaque
// ones, which only introspection reads. See handler.go for the test-only
// endpoints' fields and storage.go for what each grant issues.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "idp:", err)
		os.Exit(1)
	}
}

// clientFlags collects repeated -client id:secret[:scope ...] flags.
type clientFlags []client

func (c *clientFlags) String() string { return "" }

func (c *clientFlags) Set(v string) error {
	id, rest, ok := strings.Cut(v, ":")
	if !ok || id == "" {
		return errors.New("want id:secret[:scope ...]")
	}
	secret, scopes, _ := strings.Cut(rest, ":")
	if secret == "" {
		return fmt.Errorf("client %q has an empty secret", id)
	}
	for _, have := range *c {
		if have.id == id {
			return fmt.Errorf("client %q given twice", id)
		}
	}
	*c = append(*c, client{id: id, secret: secret, scopes: strings.Fields(scopes)})
	return nil
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("idp", flag.ContinueOnError)
	port := fs.Int("port", 0, "TCP port on 127.0.0.1; 0 picks a free one")
	var clients clientFlags
	fs.Var(&clients, "client", "a client, id:secret[:scope ...] (neither id nor secret may contain a colon; scopes space-separated: what client_credentials may ask for, and gets when it asks for none); repeat for several")
	audience := fs.String("audience", "", "default audience (aud) of a token whose request names no resource; empty: the client id")
	tokenTTL := fs.Duration("token-ttl", time.Hour, "lifetime of issued access tokens")
	keepOld := fs.Bool("keep-old-keys", true, "whether POST /test/rotate keeps the previous keys in the JWKS when the request does not say")
	watchStdin := fs.Bool("watch-stdin", true, "exit when stdin reaches EOF")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *port < 0 || *port > 65535 {
		return fmt.Errorf("-port %d is out of range", *port)
	}
	if *tokenTTL <= 0 {
		return fmt.Errorf("-token-ttl %v must be positive", *tokenTTL)
	}
	if *audience != "" {
		if err := checkResources([]string{*audience}); err != nil {
			return fmt.Errorf("-audience: %w", err)
		}
	}

	s, err := newStorage(clients, *audience, *tokenTTL)
	if err != nil {
		return err
	}
	s.keepOldKeys = *keepOld

	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	issuer := "http://" + ln.Addr().String()
	h, err := newHandler(issuer, s)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	line, err := json.Marshal(map[string]string{"issuer": issuer})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if *watchStdin {
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			stop()
		}()
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	<-served
	return nil
}
