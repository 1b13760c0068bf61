package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzSecret is the value of every variable the fuzzed configs read: it
// must never appear in a problem unless the input itself contains it.
const fuzzSecret = "s3cr3t-VALUE-q9"

// FuzzParse feeds Parse arbitrary bytes, seeded with every testdata file.
// Properties: no panic; an error is a *ValidationError whose problems all
// have messages; no problem contains a variable's value; a Config that
// loads also validates.
func FuzzParse(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "*.*"))
	if err != nil {
		f.Fatal(err)
	}
	invalid, err := filepath.Glob(filepath.Join("testdata", "invalid", "*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range append(seeds, invalid...) {
		if strings.HasSuffix(file, ".golden") {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, strings.HasSuffix(file, ".json"), false)
		f.Add(data, strings.HasSuffix(file, ".json"), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, isJSON, overrides bool) {
		format := "yaml"
		if isJSON {
			format = "json"
		}
		opts := &LoadOptions{LookupEnv: func(name string) (string, bool) {
			if strings.HasPrefix(name, "MCP_GATEWAY_") && !overrides {
				return "", false
			}
			return fuzzSecret, true
		}}
		c, err := Parse(data, format, "/base", opts)
		if err == nil {
			if c == nil {
				t.Fatal("Parse returned neither a Config nor an error")
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("loaded Config does not validate: %v", err)
			}
			_ = c.Warnings()
			return
		}
		if c != nil {
			t.Error("Parse returned a Config along with an error")
		}
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("error %T is not a *ValidationError: %v", err, err)
		}
		if len(ve.Problems) == 0 {
			t.Fatal("ValidationError without problems")
		}
		leakable := strings.Contains(string(data), fuzzSecret)
		for _, p := range ve.Problems {
			if p.Message == "" {
				t.Errorf("problem at %q has no message", p.Path)
			}
			if !leakable && strings.Contains(p.String(), fuzzSecret) {
				t.Errorf("problem leaks a variable's value: %q", p)
			}
		}
	})
}
