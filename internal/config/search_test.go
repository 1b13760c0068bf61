package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSearchDecode: search.expose_found is off unless set; a team's
// search.expose_found overrides it either way, and a team without one
// takes it.
func TestSearchDecode(t *testing.T) {
	t.Parallel()
	src := `
policy: {mode: search}
search: {expose_found: true}
auth: {mode: api_key}
teams:
  - {name: inherits, api_keys: ["inherits-key-0000001"]}
  - {name: off, api_keys: ["off-team-key-0000002"], search: {expose_found: false}}
  - {name: on, api_keys: ["on-team-key-00000003"], search: {expose_found: true}}
upstreams:
  - {name: a, url: "http://127.0.0.1:9000/mcp"}
`
	c, err := Parse([]byte(src), "yaml", "", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Search.ExposeFound {
		t.Errorf("search.expose_found: true decoded as false")
	}
	got := map[string]*bool{}
	for _, tm := range c.Teams {
		got[tm.Name] = tm.Search.ExposeFound
	}
	yes, no := true, false
	if diff := cmp.Diff(map[string]*bool{"inherits": nil, "off": &no, "on": &yes}, got); diff != "" {
		t.Errorf("teams[].search.expose_found (-want +got):\n%s", diff)
	}

	d, err := Parse([]byte("upstreams: [{name: a, url: \"http://127.0.0.1:9000/mcp\"}]\n"), "yaml", "", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if d.Search.ExposeFound {
		t.Errorf("search.expose_found defaults to true, want false")
	}
}

// TestSearchProblems: a value that is not a boolean and an unknown key
// under search are errors with their key path.
func TestSearchProblems(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, src, path string }{
		{"not a bool", "search: {expose_found: sometimes}\n", "search.expose_found"},
		{"unknown key", "search: {expose: true}\n", "search.expose"},
		{"team not a bool", "teams: [{name: a, search: {expose_found: [true]}}]\n", "teams[0].search.expose_found"},
		{"team unknown key", "teams: [{name: a, search: {max: 3}}]\n", "teams[0].search.max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.src+"upstreams: [{name: a, url: \"http://127.0.0.1:9000/mcp\"}]\n"), "yaml", "", mapEnv(nil))
			found := false
			for _, p := range problemsOf(t, err) {
				found = found || p.Path == tt.path
			}
			if !found {
				t.Errorf("problems %v, want one at %s", problemsOf(t, err), tt.path)
			}
		})
	}
}
