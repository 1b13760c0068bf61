package mcpheader

import "strings"

// MediaType returns the media type of a Content-Type (or one Accept
// entry) in lower case, without its parameters: "application/json" for
// "Application/JSON; charset=utf-8". It is mime.ParseMediaType without
// the parameter map, which the hot path pays for on every message and
// never reads; a value that is not a media type comes back trimmed, and
// compares equal to none.
func MediaType(v string) string {
	if i := strings.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	v = strings.TrimSpace(v)
	for i := 0; i < len(v); i++ {
		if c := v[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(v)
		}
	}
	return v
}
