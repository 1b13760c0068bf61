package router

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestHostTokenHidden: a caller's token shows in no formatting of the
// caller, nor in a log record that names it.
func TestHostTokenHidden(t *testing.T) {
	const secret = "eyJhbGciOi.host-token.sig"
	c := &Caller{Principal: "oauth:https://idp#alice", Token: HostToken(secret)}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("call", "caller", c, "token", c.Token)
	out := fmt.Sprintf("%v %+v %#v %s", c, *c, *c, c.Token) + buf.String()
	if strings.Contains(out, secret) {
		t.Errorf("the token shows: %s", out)
	}
}
