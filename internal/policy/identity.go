package policy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Identity is who a caller is, as far as policy cares: the view its
// credentials select. A later identity kind (JWT, OAuth) adds claims
// here and maps them to a team the same way.
type Identity struct {
	// Team is the team's name; "" is the default view (no teams, or
	// auth mode none).
	Team string
	// Key identifies the credential for audit logs without revealing it:
	// "sha256:" and the first 12 hex digits of the key's digest.
	Key string
	// ID is who the caller is, for binding what the gateway keeps for a
	// caller (sessions, parked calls, per-client upstream sessions) to
	// it: "key:" and the whole digest of the API key; "" without
	// authentication.
	ID string
	// Profile is the profile whose path the request came on; "" for the
	// main endpoint. Credentials never select it: the server sets it
	// from the path.
	Profile string
	// Audience, when not "", restricts the credential to the paths of
	// some profiles: an OAuth token whose audience is only profiles'
	// URLs (<resource>/<profile>), each name followed by a space. ""
	// (API keys, and tokens for the gateway's resource) is good on every
	// path. See AllowsPath.
	Audience string
}

// AllowsPath reports whether the credential is good on the path of
// profile ("" for the main endpoint).
func (id Identity) AllowsPath(profile string) bool {
	return id.Audience == "" || profile != "" && strings.Contains(" "+id.Audience, " "+profile+" ")
}

// View is the key of the view the caller sees: its team's, narrowed by
// its profile (ViewKey).
func (id Identity) View() string { return ViewKey(id.Team, id.Profile) }

// ErrUnauthenticated means the caller presented no usable credentials;
// ErrInvalidCredentials means it presented ones that match no identity.
var (
	ErrUnauthenticated    = errors.New("no credentials")
	ErrInvalidCredentials = errors.New("credentials not recognised")
)

// APIKeys authenticates callers by API key (auth mode api_key). Keys are
// kept only as SHA-256 digests, and a key is compared with every digest
// in constant time, so neither the configuration nor the timing of a
// failed attempt tells anything about the keys.
type APIKeys struct {
	digests [][sha256.Size]byte
	teams   []string
}

// NewAPIKeys builds the key table from each team's keys, as written in
// gateway.yaml: the key itself (usually from ${ENV}) or "sha256:<hex>".
func NewAPIKeys(teamKeys map[string][]string) (*APIKeys, error) {
	k := &APIKeys{}
	for team, keys := range teamKeys {
		for _, key := range keys {
			d, err := keyDigest(key)
			if err != nil {
				return nil, fmt.Errorf("team %s: %w", team, err)
			}
			k.digests = append(k.digests, d)
			k.teams = append(k.teams, team)
		}
	}
	if len(k.digests) == 0 {
		return nil, errors.New("auth mode api_key needs at least one team with api_keys")
	}
	return k, nil
}

func keyDigest(key string) ([sha256.Size]byte, error) {
	if h, ok := strings.CutPrefix(key, "sha256:"); ok {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size {
			return [sha256.Size]byte{}, errors.New(`a "sha256:" key needs 64 hexadecimal digits`)
		}
		return [sha256.Size]byte(b), nil
	}
	if key == "" {
		return [sha256.Size]byte{}, errors.New("empty API key")
	}
	return sha256.Sum256([]byte(key)), nil
}

// Team returns the team of the identity id (Identity.ID), and false when
// no key of the table has that id (it was removed): what a reload asks of
// the sessions and streams opened before it.
func (k *APIKeys) Team(id string) (string, bool) {
	h, ok := strings.CutPrefix(id, "key:")
	if !ok {
		return "", false
	}
	d, err := hex.DecodeString(h)
	if err != nil || len(d) != sha256.Size {
		return "", false
	}
	for i := range k.digests {
		if k.digests[i] == [sha256.Size]byte(d) {
			return k.teams[i], true
		}
	}
	return "", false
}

// Identify returns the identity of an API key.
func (k *APIKeys) Identify(key string) (Identity, error) {
	if key == "" {
		return Identity{}, ErrUnauthenticated
	}
	d := sha256.Sum256([]byte(key))
	found := -1
	for i := range k.digests {
		// Every digest is compared, match or not.
		if subtle.ConstantTimeCompare(d[:], k.digests[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Identity{}, ErrInvalidCredentials
	}
	return Identity{Team: k.teams[found], Key: "sha256:" + hex.EncodeToString(d[:6]), ID: "key:" + hex.EncodeToString(d[:])}, nil
}
