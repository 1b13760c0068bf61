package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/server"
)

const (
	// defaultStatusTimeout bounds the exchange with /readyz, from dialing
	// to the end of the body.
	defaultStatusTimeout = 5 * time.Second
	// maxReadyzBytes bounds the /readyz body read: a gateway's is a few
	// kilobytes per upstream.
	maxReadyzBytes = 16 << 20
	// maxErrorChars is how much of an upstream's last error a row shows.
	maxErrorChars = 80
)

// statusArgs are the flags of `mcp-gateway status`.
type statusArgs struct {
	// url is --url: the gateway's base URL or its /readyz URL; "" means
	// the gateway cfg configures.
	url    string
	cfg    *config.Config
	asJSON bool
	// timeout is --timeout; 0 means defaultStatusTimeout.
	timeout time.Duration
}

// statusCommand prints a running gateway's /readyz as tables (or, with
// --json, as it came). It exits 0 when the gateway is ready, 1 when it
// is not (its 503 carries the same JSON, printed too) or cannot be read.
func statusCommand(ctx context.Context, a statusArgs, stdout, stderr io.Writer) int {
	target, client, err := statusClient(a)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-gateway status: %v\n", err)
		return exitUsage
	}
	defer client.CloseIdleConnections()
	ready, raw, err := fetchReadiness(ctx, client, target)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-gateway status: %v\n", err)
		return exitError
	}
	if a.asJSON {
		out := safeJSON(raw)
		if !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
		_, _ = stdout.Write(out)
	} else {
		writeStatus(stdout, target, ready, useColour(stdout))
	}
	if !ready.Ready {
		return exitError
	}
	return exitOK
}

// statusClient returns the /readyz URL to ask and the client to ask it
// with.
func statusClient(a statusArgs) (string, *http.Client, error) {
	timeout := a.timeout
	if timeout <= 0 {
		timeout = defaultStatusTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	client := &http.Client{
		Transport: tr,
		Timeout:   timeout,
		// The gateway never redirects /readyz: a redirect comes from
		// something in front of it (a login page), reported as such.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if a.url != "" {
		target, err := readyzURL(a.url)
		return target, client, err
	}
	target := configReadyzURL(a.cfg)
	if a.cfg.TLS != nil {
		// The gateway's own certificate is trusted, as well as the
		// system's roots: a self-signed certificate is common on a
		// gateway reached by its listen address.
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if pem, err := os.ReadFile(a.cfg.TLS.CertFile); err == nil {
			roots.AppendCertsFromPEM(pem)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	return target, client, nil
}

// readyzURL is the /readyz URL of --url, which may be the gateway's base
// URL (a path before /readyz is kept: a proxy's prefix) or its /readyz.
func readyzURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url %q: want the gateway's http:// or https:// URL, its base or its /readyz", raw)
	}
	u.Fragment, u.RawFragment = "", ""
	if !strings.HasSuffix(u.Path, "/readyz") {
		u = u.JoinPath("readyz")
	}
	return u.String(), nil
}

// configReadyzURL is the /readyz URL of the gateway cfg configures: its
// listen address, whose unspecified host (every interface) is reached on
// loopback, over https when tls is set. An IP literal passes the probe
// Host check whatever allowed_hosts says.
func configReadyzURL(cfg *config.Config) string {
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil { // validated; kept whole rather than guessed at
		host, port = cfg.Listen, ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	hostport := host
	if port != "" {
		hostport = net.JoinHostPort(host, port)
	}
	return (&url.URL{Scheme: scheme, Host: hostport, Path: "/readyz"}).String()
}

// fetchReadiness asks target for the gateway's readiness. It returns the
// decoded body and the body as it came, for 200 and 503 (not ready)
// alike; an error for anything that is not the gateway's /readyz JSON,
// saying what came instead.
func fetchReadiness(ctx context.Context, client *http.Client, target string) (*server.Readiness, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", target, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		var ne net.Error
		var cv *tls.CertificateVerificationError
		switch {
		case errors.As(err, &cv):
			return nil, nil, fmt.Errorf("cannot reach the gateway at %s: %w (give --url with a name the certificate is for)", target, err)
		case errors.As(err, &ne) && ne.Timeout():
			return nil, nil, fmt.Errorf("no answer from %s within %s: %w", target, client.Timeout, err)
		}
		return nil, nil, fmt.Errorf("cannot reach the gateway at %s: %w", target, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReadyzBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the answer of %s: %w", target, err)
	}
	if len(raw) > maxReadyzBytes {
		return nil, nil, fmt.Errorf("%s answered more than %d bytes: not the gateway's /readyz", target, maxReadyzBytes)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return nil, nil, refusal(target, resp, raw)
	}
	// ready is a pointer to tell a missing member from false: the
	// gateway always sends ready, upstreams and views.
	var got struct {
		server.Readiness
		Ready *bool `json:"ready"`
	}
	if err := json.Unmarshal(raw, &got); err != nil || got.Ready == nil || got.Upstreams == nil || got.Views == nil {
		return nil, nil, fmt.Errorf("%s answered %s with %s: not the gateway's /readyz JSON", target, resp.Status, describeBody(resp, raw))
	}
	got.Readiness.Ready = *got.Ready && resp.StatusCode == http.StatusOK
	return &got.Readiness, raw, nil
}

// refusal explains an answer of target other than 200 or 503.
func refusal(target string, resp *http.Response, raw []byte) error {
	status, what := resp.Status, describeBody(resp, raw)
	// The gateway's own refusals are JSON-RPC errors whose message
	// starts with the status text ("Forbidden: Host ... is not allowed").
	var rpc struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &rpc) == nil && rpc.Error != nil {
		status, what = strconv.Itoa(resp.StatusCode), printable(rpc.Error.Message, 200)
	}
	switch code := resp.StatusCode; {
	case code == http.StatusForbidden:
		return fmt.Errorf("%s answered %s: %s (/readyz answers a Host that is an IP literal or in allowed_hosts)", target, status, what)
	case code == http.StatusUnauthorized || code == http.StatusProxyAuthRequired:
		return fmt.Errorf("%s answered %s: it asks for credentials, which the gateway's /readyz never does: something in front of the gateway does (give --url of the gateway itself)", target, resp.Status)
	case code == http.StatusNotFound:
		return fmt.Errorf("%s answered %s: no /readyz there (give --url of the gateway, its base URL or its /readyz)", target, resp.Status)
	case code >= 300 && code < 400:
		return fmt.Errorf("%s answered %s to %s: the gateway never redirects /readyz, something in front of it does (give --url of the gateway itself)", target, resp.Status, printable(resp.Header.Get("Location"), 200))
	}
	return fmt.Errorf("%s answered %s: %s", target, status, what)
}

// describeBody says what a body that is not the expected JSON is: its
// type and its start, made printable.
func describeBody(resp *http.Response, raw []byte) string {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "no Content-Type"
	}
	start := strings.TrimSpace(string(raw))
	if start == "" {
		return printable(ct, 100) + ", empty"
	}
	return printable(ct, 100) + ", body: " + printable(start, 60)
}

// writeStatus prints readiness as tables: upstreams, views, and, under
// pinning, what is quarantined and flagged. Every string from the
// gateway (upstream errors and names of definitions come from upstream
// servers) is printed through printable.
func writeStatus(w io.Writer, target string, r *server.Readiness, colour bool) {
	verdict, style := "ready", styleGood
	if !r.Ready {
		verdict, style = "NOT READY", styleBad
	}
	fmt.Fprintf(w, "%s: %s\n\n", target, paint(colour, style, verdict))

	rows := [][]string{{"UPSTREAM", "STATE", "REQUIRED", "ERA", "TRANSPORT", "TOOLS", "PROMPTS", "RESTARTS", "BREAKER", "ERROR"}}
	styles := []string{styleHead}
	for _, u := range r.Upstreams {
		state := string(u.State)
		if u.RetryAt != nil {
			state += ", retry " + retryIn(*u.RetryAt)
		}
		era := "-"
		if u.Era != "" {
			era = u.Era + " " + u.Protocol
		}
		breaker := "-"
		switch u.State {
		case router.PhaseUnavailable:
			breaker = "open"
		case router.PhaseReady, router.PhaseDegraded:
			breaker = "closed"
		}
		required := "no"
		if u.Required {
			required = "yes"
		}
		rows = append(rows, []string{printable(u.Name, 0), printable(state, 0), required, printable(era, 0), printable(cmp.Or(u.Transport, "-"), 0),
			strconv.Itoa(u.Tools), strconv.Itoa(u.Prompts), strconv.FormatUint(u.Restarts, 10), breaker, printable(u.Error, maxErrorChars)})
		styles = append(styles, upstreamStyle(u.State))
	}
	writeTable(w, colour, rows, styles)

	fmt.Fprintln(w)
	rows = [][]string{{"VIEW", "MODE", "TOOLS", "TOKENS", "LISTED TOKENS", "CUT"}}
	styles = []string{styleHead}
	for _, v := range r.Views {
		name := printable(v.Name, 0)
		if v.Name == "" {
			name = "(default)"
		}
		rows = append(rows, []string{name, printable(string(v.Mode), 0), strconv.Itoa(v.Tools), orDash(v.Tokens), orDash(v.ListedTokens), strconv.Itoa(len(v.Cut))})
		styles = append(styles, "")
	}
	writeTable(w, colour, rows, styles)

	if r.Quarantined == nil && r.Flagged == nil {
		return // pinning is off
	}
	fmt.Fprintln(w)
	if len(r.Quarantined)+len(r.Flagged) == 0 {
		fmt.Fprintln(w, "pinning: nothing quarantined or flagged")
		return
	}
	rows = [][]string{{"PINNING", "KIND", "NAME", "UPSTREAM", "REASON", "DETAIL"}}
	styles = []string{styleHead}
	for _, list := range []struct {
		what, style string
		defs        []router.PinStatus
	}{{"quarantined", styleBad, r.Quarantined}, {"flagged", styleWarn, r.Flagged}} {
		for _, d := range list.defs {
			rows = append(rows, []string{list.what, printable(string(d.Kind), 0), printable(d.Name, 0), printable(d.Upstream, 0),
				printable(string(d.Reason), 0), printable(d.Detail, maxErrorChars)})
			styles = append(styles, list.style)
		}
	}
	writeTable(w, colour, rows, styles)
}

// retryIn says when an upstream is tried again, from now.
func retryIn(at time.Time) string {
	d := time.Until(at).Round(time.Second)
	if d <= 0 {
		return "now"
	}
	return "in " + d.String()
}

func orDash(n int) string {
	if n == 0 {
		return "-" // not measured
	}
	return strconv.Itoa(n)
}

// SGR styles of rows, when stdout is a terminal.
const (
	styleHead = "1"
	styleGood = "32"
	styleWarn = "33"
	styleBad  = "31"
)

func upstreamStyle(p router.Phase) string {
	switch p {
	case router.PhaseReady:
		return ""
	case router.PhaseStarting, router.PhaseDegraded:
		return styleWarn
	}
	return styleBad
}

// writeTable aligns rows (cells free of tabs and line breaks: printable
// escapes them) and, with colour, paints each line in its style. Lines
// are painted whole after alignment, for tabwriter would count the
// escape sequences as text.
func writeTable(w io.Writer, colour bool, rows [][]string, styles []string) {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for i, l := range lines {
		style := ""
		if i < len(styles) {
			style = styles[i]
		}
		fmt.Fprintln(w, paint(colour, style, strings.TrimRight(l, " ")))
	}
}

func paint(colour bool, style, s string) string {
	if !colour || style == "" {
		return s
	}
	return "\x1b[" + style + "m" + s + "\x1b[0m"
}

// useColour reports whether w is a terminal that wants colour
// (https://no-color.org).
func useColour(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// printable returns s as it is safe to show on a terminal: every
// character that is not printable (C0 controls such as ESC, which start
// escape sequences, and BEL, tab and line breaks; DEL; C1 controls such
// as CSI; format characters such as bidi controls, zero-width and tag
// characters; U+FFFD, which stands for bytes that were not UTF-8) as
// \u{X}, as pin's diffs show them. max, when positive, is how many
// characters of s to keep, then "...".
func printable(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if max > 0 && n == max {
			b.WriteString("...")
			break
		}
		n++
		if r != utf8.RuneError && unicode.IsPrint(r) {
			b.WriteRune(r)
			continue
		}
		fmt.Fprintf(&b, "\\u{%X}", r)
	}
	return b.String()
}

// safeJSON returns the JSON text raw (valid JSON) with every character a
// terminal would act on or hide written as a \u escape, which means the
// same in JSON. Valid JSON holds characters below U+0020 only as
// whitespace between tokens, but DEL, C1 controls (CSI among them) and
// format characters may stand raw in its strings: there, and only there,
// they are escaped.
func safeJSON(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for len(raw) > 0 {
		r, n := utf8.DecodeRune(raw)
		switch {
		case r < utf8.RuneSelf && r != 0x7F:
			out = append(out, raw[0])
		case r != utf8.RuneError && unicode.IsPrint(r):
			out = append(out, raw[:n]...)
		default:
			// Outside the BMP: a surrogate pair (RFC 8259 §7).
			if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
				out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		}
		raw = raw[n:]
	}
	return out
}
