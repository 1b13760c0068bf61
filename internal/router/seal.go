package router

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// The requestState the gateway hands a modern host (2026-07-28
// basic/patterns/mrtr) is attacker-controlled input when it comes back,
// and it decides which call a retry continues. So it is sealed: encrypted
// and authenticated with AES-256-GCM under a key of this router, and it
// holds what the spec advises checking on receipt: the principal it was
// issued to (here its identity and view), a short expiry, and the
// originating request (method and exposed name). It names either a call
// parked in this process (a legacy upstream waiting for the host's
// input) or, for a modern upstream, that upstream's own requestState,
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
	// Upstream is the modern upstream whose own requestState (State, nil
	// when it gave none) the gateway carries.
	Upstream string           `json:"u,omitempty"`
	State    *json.RawMessage `json:"x,omitempty"`
}

// sealer seals and opens request states.
type sealer struct{ aead cipher.AEAD }

// newSealer returns a sealer with a new random key.
func newSealer() *sealer {
	var key [32]byte
	_, _ = rand.Read(key[:]) // crypto/rand.Read never fails (Go 1.24+)
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return &sealer{aead: aead}
}

// seal returns st as a requestState, expiring stateTTL from now.
func (s *sealer) seal(st sealedState) string {
	st.Expires = time.Now().Add(stateTTL).UnixMilli()
	plain, _ := json.Marshal(st) // plain strings and numbers always marshal
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	_, _ = rand.Read(nonce)
	sealed := s.aead.Seal(nonce, nonce, plain, []byte(statePrefix))
	return statePrefix + base64.RawURLEncoding.EncodeToString(sealed)
}

// errBadState: a requestState that is not genuine, has expired, or
// belongs to another caller or request.
var errBadState = errors.New("requestState is unknown, expired, or was issued for another caller, request or gateway replica; send the request again without it")

// open returns what a requestState holds when it is genuine, unexpired
// and was issued to c for method and subject.
func (s *sealer) open(state string, c *Caller, method, subject string) (*sealedState, error) {
	b64, ok := strings.CutPrefix(state, statePrefix)
	if !ok {
		return nil, errBadState
	}
	sealed, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(sealed) < s.aead.NonceSize() {
		return nil, errBadState
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(statePrefix))
	if err != nil {
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
