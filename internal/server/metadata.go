package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// metadataPath is where RFC 9728 puts protected resource metadata.
const metadataPath = "/.well-known/oauth-protected-resource"

// ResourceMetadata is the gateway's OAuth 2.0 protected resource
// metadata (RFC 9728), which tells a host where to get a token for it.
type ResourceMetadata struct {
	// Resource is the gateway's canonical resource URL (RFC 8707), the
	// audience its tokens carry.
	Resource string
	// AuthorizationServers are the issuers whose tokens are accepted.
	AuthorizationServers []string
	// ScopesSupported are the scopes listed in the metadata.
	ScopesSupported []string
	// RequiredScopes are named in a 401's challenge (scope), so that a
	// host asks for them at once.
	RequiredScopes []string
}

// URL returns where the metadata of Resource is (RFC 9728 §3.1): the
// well-known path inserted between the host and the resource's path.
func (m *ResourceMetadata) URL() string {
	u, err := url.Parse(m.Resource)
	if err != nil || u.Host == "" {
		return metadataPath
	}
	u.Path = metadataPath + strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	u.Fragment = ""
	return u.String()
}

// path is the resource URL's path, without a trailing "/".
func (m *ResourceMetadata) path() string {
	u, err := url.Parse(m.Resource)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.Path, "/")
}

// resourceMetadata serves the metadata; 404 without OAuth.
func (s *Server) resourceMetadata(w http.ResponseWriter, r *http.Request) {
	md := s.meta.Load()
	if md == nil {
		http.NotFound(w, r)
		return
	}
	body := struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		ScopesSupported        []string `json:"scopes_supported,omitempty"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
	}{md.Resource, md.AuthorizationServers, md.ScopesSupported, []string{"header"}}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	_ = json.NewEncoder(w).Encode(body)
}

// SetResourceMetadata replaces Options.ResourceMetadata (a reloaded
// config's); nil stops serving it. The paths it is served at are those
// of the start.
func (s *Server) SetResourceMetadata(md *ResourceMetadata) { s.meta.Store(md) }
