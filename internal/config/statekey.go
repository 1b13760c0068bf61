package config

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// StateKeySize is the size of state.key: an AES-256 key.
const StateKeySize = 32

// ParseStateKey decodes a state.key: 32 bytes as 64 hex digits, or as
// base64 in the standard or URL alphabet, padded or not.
func ParseStateKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*StateKeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != StateKeySize {
				return nil, fmt.Errorf("must be %d bytes, not %d (openssl rand -base64 32 makes one)", StateKeySize, len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("must be 32 bytes in base64 or 64 hex digits (openssl rand -base64 32 makes one)")
}

// Read returns the secret's value: the environment variable's, read by
// Load, or the file's contents now, without surrounding white space.
// The error names the file, never the value.
func (s Secret) Read() (string, error) {
	if s.File == "" {
		return s.Value, nil
	}
	b, err := os.ReadFile(s.File)
	if err != nil {
		return "", fmt.Errorf("reading the secret file: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("the secret file %s is empty", s.File)
	}
	return v, nil
}

// Keys returns the sealing keys of state: Key first, then PreviousKey
// when set; none when Key is unset (each process then makes its own).
func (st State) Keys() ([][]byte, error) {
	var keys [][]byte
	for _, k := range []struct {
		name string
		s    Secret
	}{{"state.key", st.Key}, {"state.previous_key", st.PreviousKey}} {
		if k.s == (Secret{}) {
			continue
		}
		v, err := k.s.Read()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.name, err)
		}
		key, err := ParseStateKey(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.name, err)
		}
		keys = append(keys, key)
	}
	return keys, nil
}
