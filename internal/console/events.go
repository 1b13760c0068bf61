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
	owner := c.streamOwner(s)
	if !c.takeStream(owner) {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "Too many console streams open", http.StatusTooManyRequests)
		return
	}
	defer c.releaseStream(owner)

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
		if !c.sessions.touch(s, c.now()) {
			// Ended here (a logout, or pushed out by newer sessions):
			// the browser reconnects, and a session still shared is
			// taken over again.
			return
		}
		if !c.recheck(r.Context(), s, c.auth.Load(), c.now(), false) {
			c.sessions.drop(r.Context(), s)
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

// streamOwner is whom a stream counts against: the identity, over all
// its sessions (so that logging in again and again holds no more), or
// without authentication the session.
func (c *Console) streamOwner(s *session) string {
	who, _ := c.snapshot(s)
	if who.ID != "" {
		return who.ID
	}
	return string(s.key[:])
}

func (c *Console) takeStream(owner string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.streams >= maxStreams || c.streamsBy[owner] >= maxStreamsPerIdentity {
		return false
	}
	c.streamsBy[owner]++
	c.streams++
	return true
}

func (c *Console) releaseStream(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streams--
	if c.streamsBy[owner]--; c.streamsBy[owner] == 0 {
		delete(c.streamsBy, owner)
	}
}
