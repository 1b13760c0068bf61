package console

import (
	"bytes"
	"net/http"
	"strings"
	"time"
)

// events streams the live part of the page to one visitor: rendered
// again every Refresh, and sent (event "update", the HTML) when it
// changed. A session that ends gets event "ended", then the stream
// closes.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	s := c.visitor(w, r)
	if s == nil {
		http.Error(w, "Unauthorized: log in at "+c.opts.Path+"/login", http.StatusUnauthorized)
		return
	}
	if !c.takeStream(s) {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "Too many console streams open", http.StatusTooManyRequests)
		return
	}
	defer c.releaseStream(s)

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// Reconnect after 5 s, not the browser's 3.
	if !write([]byte("retry: 5000\n\n")) {
		return
	}
	refresh := time.NewTicker(c.opts.Refresh)
	defer refresh.Stop()
	alive := time.NewTicker(keepAlive)
	defer alive.Stop()
	var last []byte
	for {
		if !c.sessions.alive(s) || !c.recheck(s, c.auth.Load(), c.now()) {
			c.sessions.drop(s)
			write([]byte("event: ended\ndata: \n\n"))
			return
		}
		var b bytes.Buffer
		if err := templates.ExecuteTemplate(&b, "live", c.dashboard(s)); err != nil {
			c.log.Error("console template failed", "template", "live", "err", err)
			return
		}
		if !bytes.Equal(b.Bytes(), last) {
			last = b.Bytes()
			if !write(sseEvent("update", last)) {
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-c.closing:
			return
		case <-alive.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		case <-refresh.C:
		}
	}
}

// sseEvent is an SSE event of data, one data line per line: a browser
// joins them with "\n". A CR, which SSE also reads as a line end, is
// written as its HTML character reference (the same character in the
// page).
func sseEvent(name string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString("event: " + name + "\n")
	text := strings.ReplaceAll(string(data), "\r", "&#13;")
	for line := range strings.SplitSeq(text, "\n") {
		b.WriteString("data: ")
		b.WriteString(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}

func (c *Console) takeStream(s *session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.streams >= maxStreams {
		return false
	}
	c.sessions.mu.Lock()
	defer c.sessions.mu.Unlock()
	if s.streams >= maxStreamsPerSession {
		return false
	}
	s.streams++
	c.streams++
	return true
}

func (c *Console) releaseStream(s *session) {
	c.mu.Lock()
	c.streams--
	c.mu.Unlock()
	c.sessions.mu.Lock()
	s.streams--
	c.sessions.mu.Unlock()
}
