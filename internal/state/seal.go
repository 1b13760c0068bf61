package state

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// Sealer seals values with AES-256-GCM under its first key and opens
// them with any of its keys (state.key, then state.previous_key), so that
// what one replica seals another opens, and a key can be rotated without
// a moment when replicas disagree. A sealed value is authenticated
// together with its purpose (the associated data), so that a value sealed
// for one use cannot be presented for another.
type Sealer struct{ aeads []cipher.AEAD }

// NewSealer returns a sealer for keys (config.State.Keys: each
// config.StateKeySize bytes); with none, it makes a random key, good for
// this process only.
func NewSealer(keys [][]byte) (*Sealer, error) {
	if len(keys) == 0 {
		key := make([]byte, config.StateKeySize)
		_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
		keys = [][]byte{key}
	}
	s := &Sealer{}
	for _, key := range keys {
		if len(key) != config.StateKeySize {
			return nil, fmt.Errorf("a sealing key must be %d bytes, not %d", config.StateKeySize, len(key))
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

// RandomSealer returns a sealer with a random key of its own.
func RandomSealer() *Sealer {
	s, _ := NewSealer(nil) // a random key is always valid
	return s
}

// SealBytes seals plain for purpose: nonce, then ciphertext and tag.
func (s *Sealer) SealBytes(purpose string, plain []byte) []byte {
	aead := s.aeads[0]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, plain, []byte(purpose))
}

// OpenBytes opens what SealBytes sealed for the same purpose under any
// of the keys; false when it is not genuine.
func (s *Sealer) OpenBytes(purpose string, sealed []byte) ([]byte, bool) {
	for _, aead := range s.aeads {
		n := aead.NonceSize()
		if len(sealed) < n+aead.Overhead() {
			return nil, false
		}
		if plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(purpose)); err == nil {
			return plain, true
		}
	}
	return nil, false
}

// Seal returns plain sealed as text: prefix, then the sealed bytes in
// unpadded base64url (visible ASCII, fit for a header). The prefix is
// also the purpose.
func (s *Sealer) Seal(prefix string, plain []byte) string {
	return prefix + base64.RawURLEncoding.EncodeToString(s.SealBytes(prefix, plain))
}

// Open opens what Seal sealed with the same prefix; false when text is
// not genuine.
func (s *Sealer) Open(prefix, text string) ([]byte, bool) {
	b64, ok := strings.CutPrefix(text, prefix)
	if !ok {
		return nil, false
	}
	sealed, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		return nil, false
	}
	return s.OpenBytes(prefix, sealed)
}
