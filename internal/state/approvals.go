package state

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// approvalsKey is the Redis hash of the approvals the replicas share
// (pin --approve under state.store redis): field, a definition's key as
// the caller names it; value, the approved entry sealed for that field.
const approvalsKey = keyPrefix + "approvals"

// approvalPurpose is the associated data an approval is sealed with,
// followed by its field, so that a genuine value moved to another field
// does not open there.
const approvalPurpose = "mcpgw-approval:"

// kindApproved tells every replica that the shared approvals changed.
const kindApproved = "approved"

// Approve records entries (field: what it approves) in the shared
// approvals, each sealed with the state key, replacing what those fields
// held, then tells every replica (Handlers.Approved). With Redis down it
// fails with ErrUnavailable and records nothing; once recorded, a
// replica that missed the message reads the approvals at its next start.
func (s *Store) Approve(ctx context.Context, entries map[string][]byte) error {
	if len(entries) == 0 {
		return nil
	}
	values := make([]any, 0, 2*len(entries))
	for _, field := range slices.Sorted(maps.Keys(entries)) {
		values = append(values, field, s.sealer.SealBytes(approvalPurpose+field, entries[field]))
	}
	if err := s.rdb.HSet(ctx, approvalsKey, values...).Err(); err != nil {
		return unavailable(err)
	}
	if err := s.rdb.Publish(ctx, broadcast, s.seal(message{Kind: kindApproved, From: s.replica})).Err(); err != nil {
		return fmt.Errorf("the approvals are recorded but the replicas were not told (they apply them at their next start): %w", unavailable(err))
	}
	return nil
}

// Approvals returns the shared approvals, by field. A value that does not
// open under the state key for its field (written by someone who can
// reach Redis but lacks the key, or moved from another field) is left
// out, with a warning: it approves nothing.
func (s *Store) Approvals(ctx context.Context) (map[string][]byte, error) {
	all, err := s.rdb.HGetAll(ctx, approvalsKey).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	out := make(map[string][]byte, len(all))
	for field, sealed := range all {
		plain, ok := s.sealer.OpenBytes(approvalPurpose+field, []byte(sealed))
		if !ok {
			s.log.Warn("ignored a shared approval in Redis that was not sealed with state.key", "field", field)
			continue
		}
		out[field] = plain
	}
	return out, nil
}
