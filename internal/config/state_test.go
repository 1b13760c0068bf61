package config

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStateDecode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := bytes.Repeat([]byte{7}, StateKeySize)
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := `
state:
  store: redis
  redis: {url: "rediss://gw@redis.internal:6380/2", password: {env: REDIS_PASSWORD}, ca_file: ca.pem}
  key: {file: key}
  previous_key: {env: OLD_KEY}
shutdown: {delay: 5s, timeout: 30s}
`
	old := hex.EncodeToString(bytes.Repeat([]byte{9}, StateKeySize))
	c, err := Parse([]byte(src), "yaml", dir, mapEnv(map[string]string{"REDIS_PASSWORD": "pw", "OLD_KEY": old}))
	if err != nil {
		t.Fatal(err)
	}
	want := State{Store: StoreRedis,
		Redis:       Redis{URL: "rediss://gw@redis.internal:6380/2", Password: Secret{Env: "REDIS_PASSWORD", Value: "pw"}, CAFile: filepath.Join(dir, "ca.pem")},
		Key:         Secret{File: filepath.Join(dir, "key")},
		PreviousKey: Secret{Env: "OLD_KEY", Value: old}}
	if diff := cmp.Diff(want, c.State); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Shutdown{Delay: 5 * time.Second, Timeout: 30 * time.Second}, c.Shutdown); diff != "" {
		t.Errorf("shutdown (-want +got):\n%s", diff)
	}
	keys, err := c.State.Keys()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]byte{key, bytes.Repeat([]byte{9}, StateKeySize)}, keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}

func TestStateDefaults(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("upstreams: []\n"), "yaml", "", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.State.Store != StoreMemory || c.Shutdown != (Shutdown{Timeout: DefaultShutdownTimeout}) {
		t.Errorf("defaults: state %+v, shutdown %+v", c.State, c.Shutdown)
	}
	if keys, err := c.State.Keys(); err != nil || len(keys) != 0 {
		t.Errorf("keys without state.key: %v, %v", keys, err)
	}
}

func TestStateValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		state State
		want  []Problem
	}{
		{"redis without url or key", State{Store: StoreRedis}, []Problem{
			{Path: "state.redis.url", Message: "is required with store: redis (redis://host:6379/0 or rediss:// for TLS)"},
			{Path: "state.key", Message: "is required with store: redis: 32 random bytes (base64 or hex) in {env: VAR} or {file: PATH}, the same on every replica (openssl rand -base64 32)"},
		}},
		{"a password in the url", State{Store: StoreRedis, Redis: Redis{URL: "redis://u:secret@h:6379"}, Key: Secret{File: "k"}}, []Problem{
			{Path: "state.redis.url", Message: "must not hold a password: set state.redis.password, a secret"},
		}},
		{"another scheme", State{Store: StoreRedis, Redis: Redis{URL: "http://h:6379", CAFile: "ca.pem"}, Key: Secret{File: "k"}}, []Problem{
			{Path: "state.redis.url", Message: "must be redis://host:port[/db] or rediss://host:port[/db]"},
			{Path: "state.redis.ca_file", Message: "is used only with a rediss:// url"},
		}},
		{"a short key", State{Store: StoreRedis, Redis: Redis{URL: "redis://h:6379"}, Key: Secret{Env: "K", Value: "c2hvcnQ="}}, []Problem{
			{Path: "state.key", Message: "must be 32 bytes, not 5 (openssl rand -base64 32 makes one)"},
		}},
		{"redis settings for memory", State{Store: StoreMemory, Redis: Redis{URL: "redis://h:6379"}, PreviousKey: Secret{File: "old"}}, []Problem{
			{Path: "state.redis", Message: "is used only with store: redis"},
			{Path: "state.previous_key", Message: "needs state.key"},
		}},
		{"an unknown store", State{Store: "etcd"}, []Problem{{Path: "state.store", Message: `must be memory or redis, not "etcd"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			c.State = tc.state
			if diff := cmp.Diff(tc.want, problemsOf(t, c.Validate())); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
	c := validConfig()
	c.Shutdown = Shutdown{Delay: -time.Second, Timeout: 0}
	want := []Problem{{Path: "shutdown.delay", Message: "must be between 0s and 5m"}, {Path: "shutdown.timeout", Message: "must be greater than 0 and at most 1h"}}
	if diff := cmp.Diff(want, problemsOf(t, c.Validate())); diff != "" {
		t.Errorf("shutdown problems (-want +got):\n%s", diff)
	}
}

func TestParseStateKey(t *testing.T) {
	t.Parallel()
	key := make([]byte, StateKeySize)
	for i := range key {
		key[i] = byte(i * 37)
	}
	for _, s := range []string{hex.EncodeToString(key), base64.StdEncoding.EncodeToString(key), base64.RawURLEncoding.EncodeToString(key), " " + base64.URLEncoding.EncodeToString(key) + "\n"} {
		got, err := ParseStateKey(s)
		if err != nil || !bytes.Equal(got, key) {
			t.Errorf("ParseStateKey(%q) = %x, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "not a key", strings.Repeat("ab", 31), base64.StdEncoding.EncodeToString(key[:16])} {
		if _, err := ParseStateKey(s); err == nil {
			t.Errorf("ParseStateKey(%q) accepted", s)
		}
	}
}
