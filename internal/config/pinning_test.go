package config

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPinningDecode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		name, src string
		want      *Pinning
	}{
		{"absent: off", `listen: 127.0.0.1:8080`, nil},
		{"defaults", `pinning: {}`, &Pinning{Lockfile: filepath.Join(dir, DefaultLockfile), Mode: PinEnforce, NewTools: NewToolsAllow, Suspicious: SuspiciousFlag}},
		{"every key", `pinning: {lockfile: locks/gw.lock, mode: warn, new_tools: quarantine, suspicious: quarantine}`,
			&Pinning{Lockfile: filepath.Join(dir, "locks/gw.lock"), Mode: PinWarn, NewTools: NewToolsQuarantine, Suspicious: SuspiciousQuarantine}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(c.src), "yaml", dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, cfg.Pinning); diff != "" {
				t.Errorf("pinning (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPinningValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, src string
		want      []Problem
	}{
		{"mode", `pinning: {mode: strict}`, []Problem{{Path: "pinning.mode", Message: "must be enforce or warn"}}},
		{"new_tools", `pinning: {new_tools: block}`, []Problem{{Path: "pinning.new_tools", Message: "must be allow or quarantine"}}},
		{"suspicious", `pinning: {suspicious: warn}`, []Problem{{Path: "pinning.suspicious", Message: "must be flag or quarantine"}}},
		{"empty lockfile", `pinning: {lockfile: ""}`, []Problem{{Path: "pinning.lockfile", Message: "must be a file path, such as tools.lock (relative to the config file)"}}},
		{"unknown key", `pinning: {lock: x}`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.src), "yaml", "", nil)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse = %v, want a ValidationError", err)
			}
			if c.want == nil {
				return // an unknown key: the decoder's own message
			}
			got := ve.Problems
			for i := range got {
				got[i].Line = 0
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
