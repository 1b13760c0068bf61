package router

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/state"
)

// The requestState the gateway hands a modern host (2026-07-28
// basic/patterns/mrtr) is attacker-controlled input when it comes back,
// and it decides which call a retry continues. So it is sealed: encrypted
// and authenticated with AES-256-GCM under the gateway's key (state.key,
// shared by its replicas, or a random one of this process), and it
// holds what the spec advises checking on receipt: the principal it was
// issued to (here its identity and view), a short expiry, and the
// originating request (method and exposed name). It names either a call
// parked in a replica of the gateway (a legacy upstream waiting for the
// host's input; peers.go answers a retry that reaches another replica) or, for a modern upstream, that upstream's own requestState,
// which thus never reaches a host bare: another identity cannot replay
// it, and a host cannot point it at another upstream.

// stateTTL bounds how long a requestState is honoured: as long as a
// parked call waits for the host's input.
const stateTTL = parkTTL

// statePrefix starts every sealed requestState.
const statePrefix = "mcpgw2."

// sealedState is what a requestState holds.
type sealedState struct {
	Owner   string `json:"o"` // Caller.owner() of the host it was issued to
	Method  string `json:"m"`
	Subject string `json:"s"` // the exposed tool or prompt name, or the URI
	Expires int64  `json:"e"` // Unix milliseconds

	// Parked and Round name a parked call and its round.
	Parked string `json:"p,omitempty"`
	Round  int    `json:"r,omitempty"`
	// Replica is the gateway replica where the parked call runs (its
	// state.Store replica id); "" in a gateway of one process.
	Replica string `json:"rp,omitempty"`
	// Upstream is the modern upstream whose own requestState (State, nil
	// when it gave none) the gateway carries.
	Upstream string           `json:"u,omitempty"`
	State    *json.RawMessage `json:"x,omitempty"`
}

// sealer seals and opens request states, under the keys every replica
// shares (state.key) or, in one process, a random key of its own.
type sealer struct{ keys *state.Sealer }

// seal returns st as a requestState, expiring stateTTL from now.
func (s *sealer) seal(st sealedState) string {
	st.Expires = time.Now().Add(stateTTL).UnixMilli()
	plain, _ := json.Marshal(st) // plain strings and numbers always marshal
	return s.keys.Seal(statePrefix, plain)
}

// errBadState: a requestState that is not genuine, has expired, or
// belongs to another caller or request.
var errBadState = errors.New("requestState is unknown, expired, or was issued for another caller, request or gateway replica; send the request again without it")

// open returns what a requestState holds when it is genuine, unexpired
// and was issued to c for method and subject.
func (s *sealer) open(state string, c *Caller, method, subject string) (*sealedState, error) {
	plain, ok := s.keys.Open(statePrefix, state)
	if !ok {
		return nil, errBadState
	}
	var st sealedState
	if json.Unmarshal(plain, &st) != nil {
		return nil, errBadState
	}
	if st.Owner != c.owner() || st.Method != method || st.Subject != subject || time.Now().UnixMilli() > st.Expires {
		return nil, errBadState
	}
	return &st, nil
}

// newSealer returns a sealer with a random key of its own.
func newSealer() *sealer { return &sealer{keys: state.RandomSealer()} }
