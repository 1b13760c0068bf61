package mcptest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// HandlerClient returns an HTTP client that serves every request with h
// in the same process, with no network: for tests under testing/synctest,
// whose fake clock stands still while a goroutine waits on a real socket.
// Each request runs h on a goroutine of its own, which ends when h
// returns; the response streams through a pipe as h writes it (so SSE
// works), and the request's context as h sees it is done once h returns,
// the client closes the body, or the request's own context ends, as with
// net/http. The client reads the body to io.EOF once h returns, or to
// the context's error once the request's context ends. The URL's host is
// never dialled.
func HandlerClient(h http.Handler) *http.Client {
	return &http.Client{Transport: handlerTransport{h}}
}

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	// hctx is the handler's: it ends when the handler returns, the client
	// closes the body, or the client's request ends. Only the last is an
	// error for the client, which then reads the context's error (the
	// PipeWriter is closed with it: a closed PipeReader would read
	// ErrClosedPipe). The handler's return is io.EOF, and must not cut
	// short a body the client is still reading.
	rctx := req.Context()
	hctx, hcancel := context.WithCancel(rctx)
	in := req.Clone(hctx)
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.ContentLength = int64(len(body))
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "127.0.0.1:1"
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer hcancel()
		defer func() {
			// A handler aborts a response with http.ErrAbortHandler: the
			// client sees a body cut short, as net/http does it.
			if p := recover(); p != nil {
				if p != http.ErrAbortHandler { //nolint:errorlint // net/http compares the same way
					panic(p)
				}
				w.WriteHeader(http.StatusOK)
				pw.CloseWithError(io.ErrUnexpectedEOF)
			}
		}()
		t.h.ServeHTTP(w, in)
		w.WriteHeader(http.StatusOK) // if h wrote nothing
		if rctx.Err() != nil {
			pw.CloseWithError(contextErr(rctx))
		} else {
			pw.Close()
		}
	}()
	// The body read fails once the request's context ends, as it would
	// on a real connection, even if the handler goes on.
	stop := context.AfterFunc(rctx, func() { pw.CloseWithError(contextErr(rctx)) })
	select {
	case <-w.ready:
	case <-rctx.Done():
		stop()
		hcancel()
		pw.CloseWithError(contextErr(rctx))
		return nil, rctx.Err()
	}
	return &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &pipeBody{PipeReader: pr, done: func() { stop(); hcancel() }},
		ContentLength: -1,
		Request:       req,
	}, nil
}

// contextErr is the error a body read returns once ctx has ended: its
// cause when it has one, as net/http reports it.
func contextErr(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil && !errors.Is(err, ctx.Err()) {
		return err
	}
	return ctx.Err()
}

// pipeResponse is the ResponseWriter of an in-process request.
type pipeResponse struct {
	header http.Header
	pw     *io.PipeWriter
	ready  chan struct{} // closed by the first WriteHeader

	once   sync.Once
	status int
	sent   http.Header // the header as it was at WriteHeader
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush does nothing: every Write already waits for the reader.
func (w *pipeResponse) Flush() {}

// pipeBody is a response body whose Close also ends the request.
type pipeBody struct {
	*io.PipeReader
	done func()
}

func (b *pipeBody) Close() error {
	b.done()
	return b.PipeReader.Close()
}
