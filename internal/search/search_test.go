package search

import (
	"slices"
	"testing"
)

func TestTerms(t *testing.T) {
	for in, want := range map[string][]string{
		"read_file":               {"read", "file"},
		"listDirectoryEntries":    {"list", "directory", "entry"},
		"HTTPServer fetches URLs": {"http", "server", "fetch", "url"},
		"Create the issues":       {"create", "issue"},
		"get-weather2day":         {"get", "weather", "2", "day"},
		"stopping, listed":        {"stop", "list"},
	} {
		if got := Terms(in); !slices.Equal(got, want) {
			t.Errorf("Terms(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSearchRanksByNameAndDescription(t *testing.T) {
	docs := []Doc{
		{Name: "files__read_file", Upstream: "files", Description: "Read the complete contents of a file from the file system.", Params: []Param{{Name: "path"}}},
		{Name: "files__write_file", Upstream: "files", Description: "Create a new file or overwrite an existing file with new content."},
		{Name: "web__fetch", Upstream: "web", Description: "Fetches a URL from the internet and extracts its contents as markdown.", Params: []Param{{Name: "url", Description: "URL to fetch"}}},
		{Name: "memory__create_entities", Upstream: "memory", Description: "Create multiple new entities in the knowledge graph"},
	}
	ix := New(docs)
	if got := ix.Search("download a web page", 3, ""); len(got) == 0 || got[0].Doc != 2 {
		t.Errorf("web page: %v, want fetch first", got)
	}
	if got := ix.Search("read a file", 1, ""); len(got) != 1 || got[0].Doc != 0 {
		t.Errorf("read a file: %v, want read_file", got)
	}
	if got := ix.Search("create", 5, "memory"); len(got) != 1 || got[0].Doc != 3 {
		t.Errorf("upstream filter: %v, want only memory's tool", got)
	}
	if got := ix.Search("zebra", 5, ""); len(got) != 0 {
		t.Errorf("no shared term: %v, want none", got)
	}
	if got := ix.Search("file", 0, ""); got != nil {
		t.Errorf("limit 0: %v", got)
	}
}
