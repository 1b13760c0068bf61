package router

import (
	"fmt"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// BenchmarkBuildCatalogProfiles: the cost of building every view of a
// catalog of 200 tools (20 upstreams of 10) with two teams, without and
// with profiles, each of which adds a view per team and the default:
// what a catalog change or a reload pays, never a request. Run:
//
//	go test -run '^$' -bench BuildCatalogProfiles -benchmem ./internal/router
func BenchmarkBuildCatalogProfiles(b *testing.B) {
	fakes := map[string]*fakeUpstream{}
	var order []string
	for i := range 20 {
		name := fmt.Sprintf("up%d", i)
		var names []string
		for j := range 10 {
			names = append(names, fmt.Sprintf("tool_%d", j))
		}
		fakes[name] = &fakeUpstream{lists: map[string][]string{"tools/list": tools(names...)}}
		order = append(order, name)
	}
	teams := []policy.Team{{Name: "data", Allow: []string{"up1*"}}, {Name: "ops", Deny: []string{"up2__*"}}}
	for _, n := range []int{0, 4} {
		b.Run(fmt.Sprintf("profiles=%d", n), func(b *testing.B) {
			rules := policy.Rules{Teams: teams}
			for i := range n {
				rules.Profiles = append(rules.Profiles, policy.Team{Name: fmt.Sprintf("p%d", i), Allow: []string{fmt.Sprintf("up%d*", i)}})
			}
			r := startRouter(b, Options{Rules: rules}, fakes, order...)
			if got, want := len(r.catalog().views), 3*(1+n); got != want {
				b.Fatalf("%d views, want %d", got, want)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r.buildCatalog()
			}
		})
	}
}
