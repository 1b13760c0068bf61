package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
)

// Versions the load tool speaks.
const (
	legacyVersion = "2025-11-25"
	modernVersion = "2026-07-28"
)

// conn is one HTTP/1.1 connection of one client, written by hand: a
// request is one write of prebuilt bytes, and the response is read with
// http.ReadResponse into a buffer the connection reuses. That keeps the
// tool's own cost per call a small fraction of a server's, so that it is
// not the bottleneck of what it measures (compare -c 8 against the echo
// server directly). It speaks plain http:// only.
type conn struct {
	addr string // host:port to dial
	host string // Host header
	path string // request path and query

	nc   net.Conn
	br   *bufio.Reader
	out  []byte // the request being written
	body []byte // the last response body
}

func newConn(u *url.URL) (*conn, error) {
	if u.Scheme != "http" {
		return nil, fmt.Errorf("only http:// URLs are supported, not %q", u.Scheme)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	path := u.RequestURI()
	return &conn{addr: addr, host: u.Host, path: path}, nil
}

func (c *conn) dial(ctx context.Context) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c.nc = nc
	if c.br == nil {
		c.br = bufio.NewReaderSize(nc, 64<<10)
	} else {
		c.br.Reset(nc)
	}
	return nil
}

func (c *conn) close() {
	if c.nc != nil {
		_ = c.nc.Close()
		c.nc = nil
	}
}

// response is what a client needs of an HTTP answer. body aliases the
// connection's buffer until the next request.
type response struct {
	status      int
	contentType string
	sessionID   string
	body        []byte
}

// do sends one request: method, extra header lines (each "Name: value\r\n")
// and body. A request on a connection the server closed while idle is
// sent again once on a new connection.
func (c *conn) do(ctx context.Context, method string, header []byte, body []byte) (*response, error) {
	for attempt := 0; ; attempt++ {
		fresh := c.nc == nil
		if fresh {
			if err := c.dial(ctx); err != nil {
				return nil, err
			}
		}
		resp, err := c.roundTrip(ctx, method, header, body)
		if err == nil {
			return resp, nil
		}
		c.close()
		if fresh || attempt > 0 || !reusedConnError(err) {
			return nil, err
		}
	}
}

// reusedConnError reports an error that a keep-alive connection the
// server had closed gives on its first use.
func reusedConnError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe")
}

func (c *conn) roundTrip(ctx context.Context, method string, header []byte, body []byte) (*response, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetDeadline(dl)
	} else {
		_ = c.nc.SetDeadline(time.Time{})
	}
	b := c.out[:0]
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, c.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, c.host...)
	b = append(b, "\r\n"...)
	b = append(b, header...)
	if body != nil || method == http.MethodPost {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	b = append(b, body...)
	c.out = b
	if _, err := c.nc.Write(b); err != nil {
		return nil, err
	}
	hr, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, err
	}
	c.body, err = readInto(c.body[:0], hr.Body, hr.ContentLength)
	hr.Body.Close()
	if err != nil {
		return nil, err
	}
	if hr.Close {
		c.close()
	}
	ct, _, _ := mime.ParseMediaType(hr.Header.Get("Content-Type"))
	return &response{status: hr.StatusCode, contentType: ct, sessionID: hr.Header.Get("Mcp-Session-Id"), body: c.body}, nil
}

// readInto appends r's bytes to b, growing it at most once when the
// length is known.
func readInto(b []byte, r io.Reader, length int64) ([]byte, error) {
	if length > 0 && int64(cap(b)) < length {
		b = make([]byte, 0, length)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// httpClient is one client of a Streamable HTTP endpoint, in one era: a
// legacy session (initialize, then every call with its Mcp-Session-Id) or
// modern stateless requests.
type httpClient struct {
	c      *conn
	modern bool
	// header holds the header lines of every call.
	header []byte
	// params is the constant part of the call's params, without the
	// closing brace.
	params []byte
	nextID int64
	body   []byte
	msg    jsonrpc.Message
}

// newHTTPClient makes a client on c and, in the legacy era, opens a
// session. Several clients may share c if they take turns.
func newHTTPClient(ctx context.Context, c *conn, modern bool, tool string, args []byte) (*httpClient, error) {
	hc := &httpClient{c: c, modern: modern}
	base := "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
	p := []byte(`{"name":`)
	p = jsonrpc.AppendString(p, tool)
	p = append(p, `,"arguments":`...)
	p = append(p, args...)
	if modern {
		p = append(p, `,"_meta":{"io.modelcontextprotocol/protocolVersion":"`+modernVersion+`","io.modelcontextprotocol/clientCapabilities":{}}`...)
		hc.header = []byte(base + "MCP-Protocol-Version: " + modernVersion + "\r\nMcp-Method: tools/call\r\nMcp-Name: " + mcpheader.Encode(tool) + "\r\n")
		hc.params = p
		return hc, nil
	}
	hc.params = p
	init := []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + legacyVersion +
		`","capabilities":{},"clientInfo":{"name":"mcp-bench","version":"1.0.0"}}}`)
	resp, err := c.do(ctx, http.MethodPost, []byte(base), init)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if _, _, err := hc.decode(resp, []byte("0")); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	version, _ := jsonrpc.StringField(hc.msg.Result, "protocolVersion")
	if version == "" {
		version = legacyVersion
	}
	hc.header = []byte(base + "MCP-Protocol-Version: " + version + "\r\n")
	if resp.sessionID != "" {
		hc.header = append(hc.header, "Mcp-Session-Id: "+resp.sessionID+"\r\n"...)
	}
	resp, err = c.do(ctx, http.MethodPost, hc.header, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	if resp.status != http.StatusAccepted && resp.status != http.StatusOK && resp.status != http.StatusNoContent {
		return nil, fmt.Errorf("notifications/initialized: HTTP %d", resp.status)
	}
	return hc, nil
}

// call makes one tools/call and returns the size of its result and
// whether the result is a tool error (isError).
func (hc *httpClient) call(ctx context.Context) (int, bool, error) {
	hc.nextID++
	id := strconv.AppendInt(nil, hc.nextID, 10)
	b := append(hc.body[:0], `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"method":"tools/call","params":`...)
	b = append(b, hc.params...)
	b = append(b, "}}"...)
	hc.body = b
	resp, err := hc.c.do(ctx, http.MethodPost, hc.header, b)
	if err != nil {
		return 0, false, err
	}
	return hc.decode(resp, id)
}

// decode reads the response to request id from a JSON body or an SSE
// stream into hc.msg.
func (hc *httpClient) decode(resp *response, id []byte) (int, bool, error) {
	if resp.status != http.StatusOK {
		return 0, false, fmt.Errorf("HTTP %d: %s", resp.status, truncate(resp.body, 200))
	}
	var data []byte
	switch resp.contentType {
	case "application/json":
		data = resp.body
	case "text/event-stream":
		data = lastResponseEvent(resp.body, id)
		if data == nil {
			return 0, false, fmt.Errorf("the SSE stream has no response to request %s", id)
		}
	default:
		return 0, false, fmt.Errorf("unexpected content type %q", resp.contentType)
	}
	if err := jsonrpc.DecodeInto(&hc.msg, data); err != nil {
		return 0, false, err
	}
	return checkResponse(&hc.msg, id)
}

// checkResponse checks that m answers request id successfully.
func checkResponse(m *jsonrpc.Message, id []byte) (int, bool, error) {
	switch {
	case !m.IsResponse() || !bytes.Equal(m.ID, id):
		return 0, false, fmt.Errorf("not the response to request %s", id)
	case m.Error != nil:
		return 0, false, m.Error
	}
	isErr, _ := jsonrpc.Field(m.Result, "isError")
	return len(m.Result), string(isErr) == "true", nil
}

// lastResponseEvent returns the data of the SSE event that answers
// request id. Events are "data:" lines; multi-line data is not expected
// from MCP servers, which write one JSON message per event.
func lastResponseEvent(stream []byte, id []byte) []byte {
	var m jsonrpc.Message
	for len(stream) > 0 {
		line := stream
		if i := bytes.IndexByte(stream, '\n'); i >= 0 {
			line, stream = stream[:i], stream[i+1:]
		} else {
			stream = nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimPrefix(data, []byte{' '})
		if jsonrpc.DecodeInto(&m, data) == nil && m.IsResponse() && bytes.Equal(m.ID, id) {
			return data
		}
	}
	return nil
}

// end ends the client's legacy session, if it has one.
func (hc *httpClient) end(ctx context.Context) {
	if !hc.modern && bytes.Contains(hc.header, []byte("Mcp-Session-Id")) {
		_, _ = hc.c.do(ctx, http.MethodDelete, hc.header, nil)
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
