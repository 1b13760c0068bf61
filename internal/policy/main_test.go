package policy

import (
	"testing"

	"go.uber.org/goleak"
)

// The OAuth verifier fetches keys in go-oidc's goroutines: none may be
// left behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
