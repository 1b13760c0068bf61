package search

import (
	"testing"

	"go.uber.org/goleak"
)

// An index starts no goroutines; this keeps it so.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
