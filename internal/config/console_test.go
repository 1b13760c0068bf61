package config

import "testing"

func TestNormalOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"HTTPS://GW.example.com":      "https://gw.example.com",
		"https://gw.example.com:443":  "https://gw.example.com",
		"http://gw.example.com:80":    "http://gw.example.com",
		"https://gw.example.com:8443": "https://gw.example.com:8443",
		"https://[::1]:443":           "https://[::1]",
		"https://gw.example.com/ui":   "https://gw.example.com/ui",
	} {
		if got := NormalOrigin(in); got != want {
			t.Errorf("NormalOrigin(%q) = %q, want %q", in, got, want)
		}
	}
}
