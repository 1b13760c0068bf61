package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// oauthIdentify stands for the OAuth verifier: each token gives one
// outcome.
func oauthIdentify(token string) (policy.Identity, error) {
	switch token {
	case "":
		return policy.Identity{}, policy.ErrUnauthenticated
	case "good":
		return policy.Identity{Team: "red", Key: "sub:alice@idp", ID: "oauth:https://idp#alice"}, nil
	case "no-scope":
		return policy.Identity{}, &policy.ScopeError{Scope: "mcp:tools mcp:admin"}
	case "no-team":
		return policy.Identity{}, policy.ErrNoTeam
	}
	return policy.Identity{}, errors.New("credentials not recognised: expired")
}

var testMetadata = &ResourceMetadata{
	Resource:             "https://gw.example.com/mcp",
	AuthorizationServers: []string{"https://idp.example.com"},
	ScopesSupported:      []string{"mcp:tools", "mcp:admin"},
	RequiredScopes:       []string{"mcp:tools"},
}

const metadataURL = "https://gw.example.com/.well-known/oauth-protected-resource/mcp"

func TestOAuthChallenges(t *testing.T) {
	ts, d, _ := newTestServerWith(t, &Options{Identify: oauthIdentify, ResourceMetadata: testMetadata})
	modernList := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`
	for _, era := range []string{"legacy", "modern"} {
		headers := func(token string) map[string]string {
			h := map[string]string{}
			if era == "modern" {
				h = modernHeaders("tools/list", "")
			}
			if token != "" {
				h["Authorization"] = "Bearer " + token
			}
			return h
		}
		body := initBody
		if era == "modern" {
			body = modernList
		}
		for _, tc := range []struct {
			name, token string
			status      int
			challenge   string
		}{
			{"no token", "", 401, `Bearer resource_metadata="` + metadataURL + `", scope="mcp:tools"`},
			{"bad token", "expired", 401, `Bearer error="invalid_token", resource_metadata="` + metadataURL + `", scope="mcp:tools"`},
			{"insufficient scope", "no-scope", 403, `Bearer error="insufficient_scope", scope="mcp:tools mcp:admin", resource_metadata="` + metadataURL + `"`},
			{"no team", "no-team", 403, ""},
		} {
			t.Run(era+", "+tc.name, func(t *testing.T) {
				r := do(t, ts, "POST", headers(tc.token), body)
				want := "Unauthorized"
				if tc.status == 403 {
					want = "Forbidden"
				}
				wantError(t, r, tc.status, jsonrpc.CodeInvalidRequest, want)
				if got := r.header.Get("WWW-Authenticate"); got != tc.challenge {
					t.Errorf("WWW-Authenticate = %q, want %q", got, tc.challenge)
				}
			})
		}
		t.Run(era+", good token", func(t *testing.T) {
			r := do(t, ts, "POST", headers("good"), body)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if era == "modern" {
				if c := d.lastCaller(); c.View != "red" {
					t.Errorf("view %q, want red", c.View)
				}
			}
		})
	}
}

func TestResourceMetadata(t *testing.T) {
	ts, _, _ := newTestServerWith(t, &Options{Identify: oauthIdentify, ResourceMetadata: testMetadata})
	want := map[string]any{
		"resource":                 "https://gw.example.com/mcp",
		"authorization_servers":    []any{"https://idp.example.com"},
		"scopes_supported":         []any{"mcp:tools", "mcp:admin"},
		"bearer_methods_supported": []any{"header"},
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		// Unauthenticated, and under any Host name (a host reaches the
		// gateway by a name the operator may not have listed).
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		req.Host = "gw.example.com"
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
		}
	}

	// Without OAuth there is no metadata.
	plain, _, _ := newTestServerWith(t, nil)
	resp, err := plain.Client().Get(plain.URL + "/.well-known/oauth-protected-resource")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("metadata without OAuth: %d, want 404", resp.StatusCode)
	}
}

func TestMetadataURL(t *testing.T) {
	for resource, want := range map[string]string{
		"https://gw.example.com/mcp":       "https://gw.example.com/.well-known/oauth-protected-resource/mcp",
		"https://gw.example.com/":          "https://gw.example.com/.well-known/oauth-protected-resource",
		"https://gw.example.com":           "https://gw.example.com/.well-known/oauth-protected-resource",
		"http://127.0.0.1:8080/a/mcp":      "http://127.0.0.1:8080/.well-known/oauth-protected-resource/a/mcp",
		"https://gw.example.com/mcp?x=1":   "https://gw.example.com/.well-known/oauth-protected-resource/mcp?x=1",
		"https://GW.example.com/mcp/teams": "https://GW.example.com/.well-known/oauth-protected-resource/mcp/teams",
	} {
		if got := (&ResourceMetadata{Resource: resource}).URL(); got != want {
			t.Errorf("URL(%s) = %s, want %s", resource, got, want)
		}
	}
}
