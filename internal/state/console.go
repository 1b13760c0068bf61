package state

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// The operator console's logins, shared by the replicas (internal/console)
// so that behind a load balancer any replica serves a logged-in browser:
// one key per session, named by the digest of its cookie (never the
// cookie itself), its value the session sealed with the state key for
// that key, expiring when unused for the TTL the console gives.
const (
	consoleKeyPrefix = keyPrefix + "console:"
	consolePurpose   = "mcpgw-console:"
)

// ErrNoConsoleSession means a console session expired or ended
// everywhere (or never was).
var ErrNoConsoleSession = errors.New("no such console session")

// PutConsoleSession records a console session (digest: the hex digest of
// its cookie) for ttl.
func (s *Store) PutConsoleSession(ctx context.Context, digest string, value []byte, ttl time.Duration) error {
	sealed := s.sealer.SealBytes(consolePurpose+digest, value)
	if err := s.rdb.Set(ctx, consoleKeyPrefix+digest, sealed, ttl).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}

// ConsoleSession reads a console session and gives it ttl more:
// ErrNoConsoleSession when it is not there, or does not open under the
// state key for its digest (written by someone who can reach Redis but
// lacks the key, or moved from another session's key).
func (s *Store) ConsoleSession(ctx context.Context, digest string, ttl time.Duration) ([]byte, error) {
	sealed, err := s.rdb.GetEx(ctx, consoleKeyPrefix+digest, ttl).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNoConsoleSession
	}
	if err != nil {
		return nil, unavailable(err)
	}
	plain, ok := s.sealer.OpenBytes(consolePurpose+digest, sealed)
	if !ok {
		s.log.Warn("ignored a console session in Redis that was not sealed with state.key")
		return nil, ErrNoConsoleSession
	}
	return plain, nil
}

// EndConsoleSession ends a console session on every replica: each drops
// its copy at its next check of the session.
func (s *Store) EndConsoleSession(ctx context.Context, digest string) error {
	if err := s.rdb.Del(ctx, consoleKeyPrefix+digest).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}
