package config

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxNodes bounds the nodes one decode may visit. YAML aliases can make a
// small file expand to a huge tree ("billion laughs"); a config with a
// thousand upstreams stays well below this.
const maxNodes = 1 << 17

// decoder turns a YAML node tree into a Config, collecting problems.
//
// It walks the tree by hand, instead of letting a library unmarshal it,
// because map keys must keep their case and order, every problem needs its
// key path, and unknown keys must be rejected one by one.
type decoder struct {
	lookup  func(string) (string, bool)
	baseDir string // for relative cwd; empty leaves cwd as written

	// literal holds nodes set from MCP_GATEWAY_* variables, which are taken
	// as they are, without ${VAR} expansion.
	literal map[*yaml.Node]bool

	// hostApp is set for a Claude Desktop style JSON file, whose other
	// top-level keys belong to the desktop app.
	hostApp bool

	problems problems
	lines    map[string]int // key path -> line of its value
	visited  int            // nodes seen, against maxNodes
	tooLarge bool           // the maxNodes problem has been reported
}

// field decodes the value v found at key path p.
type field func(p string, v *yaml.Node)

// schema describes the keys a mapping may hold.
type schema struct {
	fields map[string]field
	// hints add advice to the "unknown key" message of particular keys.
	hints map[string]string
	// ignore reports keys to skip without a problem.
	ignore func(key string) bool
}

func (d *decoder) problem(p string, n *yaml.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.problems = append(d.problems, Problem{Path: p, Line: line, Message: fmt.Sprintf(format, args...)})
}

// visit counts n against maxNodes and records its line for path p. It
// returns false once the budget is spent.
func (d *decoder) visit(p string, n *yaml.Node) bool {
	if !d.spend(n) {
		return false
	}
	if n.Line > 0 {
		if _, ok := d.lines[p]; !ok {
			d.lines[p] = n.Line
		}
	}
	return true
}

// lineOf returns the line of the value at key path p, or of its nearest
// ancestor when p was not in the file (a missing required key); 0 when
// unknown.
func (d *decoder) lineOf(p string) int {
	if line, ok := d.lines[p]; ok {
		return line
	}
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '.' || p[i] == '[' {
			if line, ok := d.lines[p[:i]]; ok {
				return line
			}
		}
	}
	return 0
}

// spend counts n against maxNodes, reporting the problem once when the
// budget runs out. It returns false from then on.
func (d *decoder) spend(n *yaml.Node) bool {
	d.visited++
	if d.exhausted() {
		if !d.tooLarge {
			d.tooLarge = true
			d.problem("", n, "the document is too large once YAML aliases are expanded")
		}
		return false
	}
	return true
}

// exhausted reports whether the decode has visited maxNodes nodes.
func (d *decoder) exhausted() bool { return d.visited >= maxNodes }

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// pair is one key and value of a mapping.
type pair struct {
	key     string
	keyNode *yaml.Node
	value   *yaml.Node
}

// pairs returns the entries of mapping n in file order, with aliases
// resolved and YAML merge keys (<<: *anchor) expanded in place. A key
// written in the mapping wins over a merged one, and an earlier merge over a
// later one. Duplicate and non-scalar keys are problems.
func (d *decoder) pairs(p string, n *yaml.Node, depth int) []pair {
	explicit := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.ScalarNode && k.Tag != "!!merge" {
			explicit[k.Value] = true
		}
	}
	var out []pair
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		// Merges multiply entries as aliases multiply nodes: count each.
		if !d.spend(k) {
			break
		}
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			if depth > 10 {
				d.problem(p, k, "merge keys (<<) nested too deeply")
				continue
			}
			srcs := []*yaml.Node{v}
			if v != nil && v.Kind == yaml.SequenceNode {
				srcs = v.Content
			}
			for _, src := range srcs {
				src = resolve(src)
				if src == nil || src.Kind != yaml.MappingNode {
					d.problem(p, k, "a merge key (<<) must name a mapping or a list of mappings")
					continue
				}
				for _, mp := range d.pairs(p, src, depth+1) {
					if !explicit[mp.key] && !seen[mp.key] {
						seen[mp.key] = true
						out = append(out, mp)
					}
				}
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.problem(p, k, "keys must be plain strings")
			continue
		}
		if seen[k.Value] {
			d.problem(join(p, k.Value), k, "duplicate key")
			continue
		}
		seen[k.Value] = true
		out = append(out, pair{key: k.Value, keyNode: k, value: v})
	}
	return out
}

// object decodes mapping n at path p with schema s. Null values count as
// absent: the field keeps its default.
func (d *decoder) object(p string, n *yaml.Node, s schema) {
	if isNull(n) || !d.visit(p, n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		if p == "" {
			d.problem(p, n, "the file must hold a mapping of keys to values at the top level")
		} else {
			d.problem(p, n, "must be a mapping of keys to values")
		}
		return
	}
	for _, kv := range d.pairs(p, n, 0) {
		if d.exhausted() {
			break
		}
		kp := join(p, kv.key)
		f, known := s.fields[kv.key]
		if !known {
			if s.ignore != nil && s.ignore(kv.key) {
				continue
			}
			d.problem(kp, kv.keyNode, "%s", unknownKey(kv.key, s))
			continue
		}
		if isNull(kv.value) {
			d.visit(kp, kv.keyNode)
			continue
		}
		f(kp, kv.value)
	}
}

// unknownKey is the message for a key s does not know, with a hint or a
// suggestion when there is one.
func unknownKey(key string, s schema) string {
	if h, ok := s.hints[key]; ok {
		return "unknown key (" + h + ")"
	}
	if sug := suggest(key, s.fields); sug != "" {
		return fmt.Sprintf("unknown key (did you mean %q?)", sug)
	}
	return "unknown key"
}

// suggest returns the known key closest to key: the same but for case, or
// at most two edits away. Empty when nothing is close.
func suggest(key string, fields map[string]field) string {
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	slices.Sort(known)
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return k
		}
	}
	best, bestDist := "", 3
	for _, k := range known {
		if dist := editDistance(key, k); dist < bestDist && dist < len(k) {
			best, bestDist = k, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt // not a typo of any key we know
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// text returns the text of scalar n with ${VAR} expanded. ok is false when n
// is not a scalar or expansion failed; the problem has been reported. A null
// scalar is "".
func (d *decoder) text(p string, n *yaml.Node, what string) (string, bool) {
	if !d.visit(p, n) {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		d.problem(p, n, "must be %s", what)
		return "", false
	}
	if isNull(n) {
		return "", true
	}
	if d.literal[n] {
		return n.Value, true
	}
	s, msgs := expand(n.Value, d.lookup)
	for _, m := range msgs {
		d.problem(p, n, "%s", m)
	}
	return s, len(msgs) == 0
}

// str decodes a string. On failure it returns the text as written (or ""),
// so that later checks do not report the same value again.
func (d *decoder) str(p string, n *yaml.Node) string {
	s, _ := d.text(p, n, "a string")
	return s
}

func (d *decoder) boolean(p string, n *yaml.Node, dst *bool) {
	s, ok := d.text(p, n, "true or false")
	if !ok {
		return
	}
	switch strings.ToLower(s) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		d.problem(p, n, "must be true or false")
	}
}

func (d *decoder) integer(p string, n *yaml.Node, dst *int) {
	var v int64
	if d.int64(p, n, &v, strconv.IntSize) {
		*dst = int(v)
	}
}

func (d *decoder) int64(p string, n *yaml.Node, dst *int64, bits int) bool {
	s, ok := d.text(p, n, "an integer")
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		d.problem(p, n, "must be a whole number written in decimal digits")
		return false
	}
	*dst = v
	return true
}

// duration decodes a Go duration string. A bare number is refused: "60"
// could mean seconds or nanoseconds, and time.ParseDuration would read it as
// neither.
func (d *decoder) duration(p string, n *yaml.Node, dst *time.Duration) {
	s, ok := d.text(p, n, `a duration such as "30s"`)
	if !ok {
		return
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		d.problem(p, n, `must be a duration with a unit, such as "30s", "1m30s" or "500ms": a bare number has no unit`)
		return
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.problem(p, n, `must be a duration such as "30s", "1m30s" or "500ms" (units ns, us, ms, s, m, h)`)
		return
	}
	*dst = v
}

// strings decodes a list of strings. A null item is "".
func (d *decoder) strings(p string, n *yaml.Node) []string {
	if !d.visit(p, n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.problem(p, n, "must be a list of strings")
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		if d.exhausted() {
			break
		}
		out = append(out, d.str(fmt.Sprintf("%s[%d]", p, i), resolve(item)))
	}
	return out
}

// stringMap decodes a mapping of strings to strings. Keys keep their case and
// are not expanded; values are. A null value is "".
func (d *decoder) stringMap(p string, n *yaml.Node) map[string]string {
	if !d.visit(p, n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.problem(p, n, "must be a mapping of names to strings")
		return nil
	}
	out := map[string]string{}
	for _, kv := range d.pairs(p, n, 0) {
		if d.exhausted() {
			break
		}
		out[kv.key] = d.str(join(p, kv.key), kv.value)
	}
	return out
}

// list calls item for each element of sequence n.
func (d *decoder) list(p string, n *yaml.Node, item func(p string, v *yaml.Node)) {
	if !d.visit(p, n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.problem(p, n, "must be a list")
		return
	}
	for i, v := range n.Content {
		if d.exhausted() {
			break
		}
		item(fmt.Sprintf("%s[%d]", p, i), resolve(v))
	}
}

// config decodes the top-level mapping into c, which holds the defaults.
func (d *decoder) config(root *yaml.Node, c *Config) {
	var upstreams, servers *yaml.Node
	s := schema{
		fields: map[string]field{
			"listen":    func(p string, v *yaml.Node) { c.Listen = d.str(p, v) },
			"endpoint":  func(p string, v *yaml.Node) { c.Endpoint = d.str(p, v) },
			"separator": func(p string, v *yaml.Node) { c.Separator = d.str(p, v) },
			"prefix":    func(p string, v *yaml.Node) { c.Prefix = PrefixMode(d.str(p, v)) },
			"tls": func(p string, v *yaml.Node) {
				t := &TLS{}
				d.object(p, v, schema{fields: map[string]field{
					"cert_file": func(p string, v *yaml.Node) { t.CertFile = d.path(p, v) },
					"key_file":  func(p string, v *yaml.Node) { t.KeyFile = d.path(p, v) },
				}})
				c.TLS = t
			},
			"allowed_origins": func(p string, v *yaml.Node) { c.AllowedOrigins = d.strings(p, v) },
			"allowed_hosts":   func(p string, v *yaml.Node) { c.AllowedHosts = d.strings(p, v) },
			"max_body_bytes":  func(p string, v *yaml.Node) { d.int64(p, v, &c.MaxBodyBytes, 64) },
			// Decoded after the walk, so that upstreams come before
			// mcpServers whatever their order in the file.
			"upstreams":  func(_ string, v *yaml.Node) { upstreams = v },
			"mcpServers": func(_ string, v *yaml.Node) { servers = v },
			"policy": func(p string, v *yaml.Node) {
				d.object(p, v, schema{fields: map[string]field{
					"max_tools":             func(p string, v *yaml.Node) { d.integer(p, v, &c.Policy.MaxTools) },
					"max_tokens":            func(p string, v *yaml.Node) { d.integer(p, v, &c.Policy.MaxTokens) },
					"description_max_chars": func(p string, v *yaml.Node) { d.integer(p, v, &c.Policy.DescriptionMaxChars) },
					"slim_schemas":          func(p string, v *yaml.Node) { d.boolean(p, v, &c.Policy.SlimSchemas) },
					"priority":              func(p string, v *yaml.Node) { c.Policy.Priority = d.strings(p, v) },
					"mode":                  func(p string, v *yaml.Node) { c.Policy.Mode = ViewMode(d.str(p, v)) },
				}})
			},
			"teams": func(p string, v *yaml.Node) {
				d.list(p, v, func(p string, v *yaml.Node) {
					if t, ok := d.team(p, v); ok {
						c.Teams = append(c.Teams, t)
					}
				})
			},
			"profiles": func(p string, v *yaml.Node) {
				d.list(p, v, func(p string, v *yaml.Node) {
					if pr, ok := d.profile(p, v); ok {
						c.Profiles = append(c.Profiles, pr)
					}
				})
			},
			"auth": func(p string, v *yaml.Node) {
				d.object(p, v, schema{fields: map[string]field{
					"mode":   func(p string, v *yaml.Node) { c.Auth.Mode = AuthMode(d.str(p, v)) },
					"oauth":  func(p string, v *yaml.Node) { d.oauth(p, v, &c.Auth.OAuth) },
					"admins": func(p string, v *yaml.Node) { c.Auth.Admins = d.strings(p, v) },
				}, hints: map[string]string{"modes": "use mode: oauth, which accepts the teams' api_keys too"}})
			},
			"limits": func(p string, v *yaml.Node) { d.limits(p, v, &c.Limits) },
			"tasks": func(p string, v *yaml.Node) {
				d.object(p, v, schema{fields: map[string]field{
					"after":            func(p string, v *yaml.Node) { d.duration(p, v, &c.Tasks.After) },
					"ttl":              func(p string, v *yaml.Node) { d.duration(p, v, &c.Tasks.TTL) },
					"max_per_identity": func(p string, v *yaml.Node) { d.integer(p, v, &c.Tasks.MaxPerIdentity) },
				}})
			},
			"state": func(p string, v *yaml.Node) {
				d.object(p, v, schema{fields: map[string]field{
					"store": func(p string, v *yaml.Node) { c.State.Store = StoreKind(d.str(p, v)) },
					"redis": func(p string, v *yaml.Node) {
						d.object(p, v, schema{fields: map[string]field{
							"url":      func(p string, v *yaml.Node) { c.State.Redis.URL = d.str(p, v) },
							"password": func(p string, v *yaml.Node) { c.State.Redis.Password = d.secret(p, v, false) },
							"ca_file":  func(p string, v *yaml.Node) { c.State.Redis.CAFile = d.path(p, v) },
						}})
					},
					"key":          func(p string, v *yaml.Node) { c.State.Key = d.secret(p, v, false) },
					"previous_key": func(p string, v *yaml.Node) { c.State.PreviousKey = d.secret(p, v, false) },
				}})
			},
			"search": func(p string, v *yaml.Node) {
				d.object(p, v, schema{fields: map[string]field{
					"expose_found": func(p string, v *yaml.Node) { d.boolean(p, v, &c.Search.ExposeFound) },
				}})
			},
			"pinning": func(p string, v *yaml.Node) {
				pn := DefaultPinning(d.baseDir)
				d.object(p, v, schema{fields: map[string]field{
					"lockfile":   func(p string, v *yaml.Node) { pn.Lockfile = d.path(p, v) },
					"mode":       func(p string, v *yaml.Node) { pn.Mode = PinMode(d.str(p, v)) },
					"new_tools":  func(p string, v *yaml.Node) { pn.NewTools = NewTools(d.str(p, v)) },
					"suspicious": func(p string, v *yaml.Node) { pn.Suspicious = SuspiciousAction(d.str(p, v)) },
				}})
				c.Pinning = pn
			},
			"console": func(p string, v *yaml.Node) {
				d.object(p, v, schema{fields: map[string]field{
					"enabled": func(p string, v *yaml.Node) {
						var on bool
						d.boolean(p, v, &on)
						c.Console.Enabled = &on
					},
					"recent_calls": func(p string, v *yaml.Node) { d.integer(p, v, &c.Console.RecentCalls) },
					"origin":       func(p string, v *yaml.Node) { c.Console.Origin = NormalOrigin(d.str(p, v)) },
				}})
			},
			"shutdown": func(p string, v *yaml.Node) {
				d.object(p, v, schema{fields: map[string]field{
					"delay":   func(p string, v *yaml.Node) { d.duration(p, v, &c.Shutdown.Delay) },
					"timeout": func(p string, v *yaml.Node) { d.duration(p, v, &c.Shutdown.Timeout) },
				}})
			},
			"telemetry": func(p string, v *yaml.Node) {
				d.object(p, v, schema{fields: map[string]field{
					"log_level":     func(p string, v *yaml.Node) { c.Telemetry.LogLevel = d.str(p, v) },
					"metrics":       func(p string, v *yaml.Node) { d.boolean(p, v, &c.Telemetry.Metrics) },
					"otlp_endpoint": func(p string, v *yaml.Node) { c.Telemetry.OTLPEndpoint = d.str(p, v) },
					"audit":         func(p string, v *yaml.Node) { d.audit(p, v, &c.Telemetry.Audit) },
				}})
			},
		},
	}
	s.ignore = func(key string) bool {
		// x- keys hold YAML anchors to reuse (x-defaults: &defaults ...).
		if strings.HasPrefix(key, "x-") {
			return true
		}
		// A desktop app's own settings (globalShortcut, preferences...) are
		// none of ours, but a near miss of one of our keys is still a typo.
		return d.hostApp && suggest(key, s.fields) == ""
	}
	d.object("", root, s)

	if upstreams != nil && upstreams.Kind == yaml.MappingNode {
		d.visit("upstreams", upstreams)
		d.problem("upstreams", upstreams, "must be a list of upstreams, each with a name (use mcpServers for a map of name: server)")
	} else if upstreams != nil {
		d.list("upstreams", upstreams, func(p string, v *yaml.Node) {
			if u, ok := d.upstream(p, v); ok {
				c.Upstreams = append(c.Upstreams, u)
			}
		})
	}
	if servers != nil {
		d.mcpServers(servers, c)
	}
	deriveNames(c.Upstreams)
}

// deriveNames gives each mcpServers entry whose key breaks the name rule
// a name derived from the key (NameFromKey), keeping the key in Key.
// Names that follow the rule, from upstreams or mcpServers, are kept as
// they are; a derived name that would repeat one (in any letter case)
// ends in a hash of its key instead, so each stays unique and the same
// on every load of the same file.
func deriveNames(ups []Upstream) {
	taken := map[string]bool{}
	for _, u := range ups {
		if nameRE.MatchString(u.Name) {
			taken[strings.ToLower(u.Name)] = true
		}
	}
	for i := range ups {
		u := &ups[i]
		if !u.fromMCPServers() || nameRE.MatchString(u.Name) {
			continue
		}
		u.Key = u.Name
		u.Name = NameFromKey(u.Key)
		if taken[strings.ToLower(u.Name)] {
			sum := sha256.Sum256([]byte(u.Key))
			tag := strings.ToLower(base32.StdEncoding.EncodeToString(sum[:])[:6])
			u.Name = u.Name[:min(len(u.Name), 32-len(tag)-1)] + "_" + tag
		}
		taken[strings.ToLower(u.Name)] = true
	}
}

// NameFromKey derives an upstream name from an mcpServers key that breaks
// the name rule: every run of characters outside [A-Za-z0-9_-] becomes
// one "_", leading and trailing ones are dropped, and the result is cut
// to 32 characters; a key with nothing left gives "server".
func NameFromKey(key string) string {
	var b strings.Builder
	gap := false
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c == '_' || c == '-' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') {
			if gap && b.Len() > 0 {
				b.WriteByte('_')
			}
			gap = false
			b.WriteByte(c)
			continue
		}
		gap = true
	}
	name := b.String()
	if len(name) > 32 {
		name = name[:32]
	}
	if name == "" {
		name = "server"
	}
	return name
}

// upstreamHints explain keys people bring from other config formats.
var upstreamHints = map[string]string{
	"type":        `did you mean "transport"? type is the mcpServers spelling`,
	"environment": `did you mean "env"?`,
	"arguments":   `did you mean "args"?`,
}

func (d *decoder) upstream(p string, n *yaml.Node) (Upstream, bool) {
	if n.Kind != yaml.MappingNode {
		d.visit(p, n)
		d.problem(p, n, "must be a mapping with name and command or url")
		return Upstream{}, false
	}
	u := DefaultUpstream()
	u.Source = p
	d.object(p, n, schema{
		fields: map[string]field{
			"name":      func(p string, v *yaml.Node) { u.Name = d.str(p, v) },
			"command":   func(p string, v *yaml.Node) { u.Command = d.command(p, v) },
			"args":      func(p string, v *yaml.Node) { u.Args = d.strings(p, v) },
			"env":       func(p string, v *yaml.Node) { u.Env = d.stringMap(p, v) },
			"cwd":       func(p string, v *yaml.Node) { u.Cwd = d.str(p, v) },
			"url":       func(p string, v *yaml.Node) { u.URL = d.str(p, v) },
			"transport": func(p string, v *yaml.Node) { u.Transport = Transport(d.str(p, v)) },
			"headers":   func(p string, v *yaml.Node) { u.Headers = d.stringMap(p, v) },
			"auth":      func(p string, v *yaml.Node) { d.upstreamAuth(p, v, &u.Auth) },
			"tls": func(p string, v *yaml.Node) {
				t := &UpstreamTLS{}
				d.object(p, v, schema{fields: map[string]field{
					"ca_file":     func(p string, v *yaml.Node) { t.CAFile = d.path(p, v) },
					"cert_file":   func(p string, v *yaml.Node) { t.CertFile = d.path(p, v) },
					"key_file":    func(p string, v *yaml.Node) { t.KeyFile = d.path(p, v) },
					"server_name": func(p string, v *yaml.Node) { t.ServerName = d.str(p, v) },
				}})
				u.TLS = t
			},
			"timeout":      func(p string, v *yaml.Node) { d.duration(p, v, &u.Timeout) },
			"session":      func(p string, v *yaml.Node) { u.Session = SessionMode(d.str(p, v)) },
			"required":     func(p string, v *yaml.Node) { d.boolean(p, v, &u.Required) },
			"max_tools":    func(p string, v *yaml.Node) { d.integer(p, v, &u.MaxTools) },
			"relay":        func(p string, v *yaml.Node) { u.Relay = d.strings(p, v) },
			"max_clients":  func(p string, v *yaml.Node) { d.integer(p, v, &u.MaxClients) },
			"idle_timeout": func(p string, v *yaml.Node) { d.duration(p, v, &u.IdleTimeout) },
			"tools":        func(p string, v *yaml.Node) { d.tools(p, v, &u.Tools) },
			"breaker": func(p string, v *yaml.Node) {
				d.object(p, v, schema{fields: map[string]field{
					"failures": func(p string, v *yaml.Node) { d.integer(p, v, &u.Breaker.Failures) },
					"cooldown": func(p string, v *yaml.Node) { d.duration(p, v, &u.Breaker.Cooldown) },
				}})
			},
			"max_timeout":   func(p string, v *yaml.Node) { d.duration(p, v, &u.MaxTimeout) },
			"max_in_flight": func(p string, v *yaml.Node) { d.integer(p, v, &u.MaxInFlight) },
			"max_queue":     func(p string, v *yaml.Node) { d.integer(p, v, &u.MaxQueue) },
			"max_message_bytes": func(p string, v *yaml.Node) {
				d.int64(p, v, &u.MaxMessageBytes, 64)
			},
			"restart": func(p string, v *yaml.Node) {
				d.object(p, v, schema{fields: map[string]field{
					"delay":        func(p string, v *yaml.Node) { d.duration(p, v, &u.Restart.Delay) },
					"max_delay":    func(p string, v *yaml.Node) { d.duration(p, v, &u.Restart.MaxDelay) },
					"crash_limit":  func(p string, v *yaml.Node) { d.integer(p, v, &u.Restart.CrashLimit) },
					"crash_window": func(p string, v *yaml.Node) { d.duration(p, v, &u.Restart.CrashWindow) },
				}})
			},
			"tasks": func(p string, v *yaml.Node) {
				d.object(p, v, schema{fields: map[string]field{
					// Set when written, even 0s: it then wins over
					// the top-level tasks.after.
					"after": func(p string, v *yaml.Node) {
						u.Tasks.After = new(time.Duration)
						d.duration(p, v, u.Tasks.After)
					},
				}})
			},
		},
		hints: upstreamHints,
	})
	d.finish(&u)
	return u, true
}

// mcpServerOnlyHint is the advice for gateway settings in an mcpServers entry.
const mcpServerOnlyHint = "mcpServers entries take command, args, env, cwd, url, type and headers; declare the server under upstreams to use gateway settings"

// mcpServers decodes a Claude Desktop style map of servers, appending them
// to c.Upstreams in file order. The key is the upstream's name.
func (d *decoder) mcpServers(n *yaml.Node, c *Config) {
	const p = "mcpServers"
	if !d.visit(p, n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.problem(p, n, "must be a mapping of server names to servers")
		return
	}
	hints := map[string]string{"transport": `did you mean "type"? transport is the upstreams spelling`}
	for _, k := range []string{"name", "timeout", "session", "required", "max_tools", "relay", "max_clients", "idle_timeout", "tools", "breaker", "max_timeout", "max_in_flight", "max_queue", "restart", "tasks", "auth"} {
		hints[k] = mcpServerOnlyHint
	}
	for _, kv := range d.pairs(p, n, 0) {
		if d.exhausted() {
			break
		}
		sp := join(p, kv.key)
		d.visit(sp, kv.keyNode)
		if kv.value == nil || kv.value.Kind != yaml.MappingNode {
			d.problem(sp, kv.keyNode, "must be a mapping with command or url")
			continue
		}
		u := DefaultUpstream()
		u.Name = kv.key
		u.Source = sp
		d.object(sp, kv.value, schema{
			fields: map[string]field{
				"command": func(p string, v *yaml.Node) { u.Command = d.command(p, v) },
				"args":    func(p string, v *yaml.Node) { u.Args = d.strings(p, v) },
				"env":     func(p string, v *yaml.Node) { u.Env = d.stringMap(p, v) },
				"cwd":     func(p string, v *yaml.Node) { u.Cwd = d.str(p, v) },
				"url":     func(p string, v *yaml.Node) { u.URL = d.str(p, v) },
				"headers": func(p string, v *yaml.Node) { u.Headers = d.stringMap(p, v) },
				"type": func(p string, v *yaml.Node) {
					// "http" is how Claude Code and others spell Streamable HTTP.
					if t := d.str(p, v); t == "http" {
						u.Transport = TransportStreamableHTTP
					} else {
						u.Transport = Transport(t)
					}
				},
			},
			hints: hints,
		})
		d.finish(&u)
		c.Upstreams = append(c.Upstreams, u)
	}
}

// command decodes a command, which must be one string: a list is a common
// slip from other formats.
func (d *decoder) command(p string, n *yaml.Node) string {
	if n.Kind == yaml.SequenceNode {
		d.visit(p, n)
		d.problem(p, n, "must be one string, the program: put its arguments in args")
		return ""
	}
	return d.str(p, n)
}

// finish infers the transport when none was written and resolves a relative
// cwd against the config file's directory.
func (d *decoder) finish(u *Upstream) {
	if u.Transport == "" {
		switch {
		case u.Command != "" && u.URL == "":
			u.Transport, u.TransportInferred = TransportStdio, true
		case u.URL != "" && u.Command == "":
			u.Transport, u.TransportInferred = TransportStreamableHTTP, true
		}
	}
	if u.Cwd != "" && d.baseDir != "" && !filepath.IsAbs(u.Cwd) {
		u.Cwd = filepath.Join(d.baseDir, u.Cwd)
	}
}

func (d *decoder) tools(p string, n *yaml.Node, t *ToolFilter) {
	d.object(p, n, schema{fields: map[string]field{
		"allow":        func(p string, v *yaml.Node) { t.Allow = d.strings(p, v) },
		"deny":         func(p string, v *yaml.Node) { t.Deny = d.strings(p, v) },
		"descriptions": func(p string, v *yaml.Node) { t.Descriptions = d.stringMap(p, v) },
		"rate": func(p string, v *yaml.Node) {
			m := d.stringMap(p, v)
			if len(m) == 0 {
				return
			}
			t.Rates = map[string]Rate{}
			for _, name := range sortedKeys(m) {
				if r, ok := d.rate(join(p, name), m[name]); ok {
					t.Rates[name] = r
				}
			}
		},
		"rename": func(p string, v *yaml.Node) {
			d.list(p, v, func(p string, v *yaml.Node) {
				var r Rename
				if v.Kind != yaml.MappingNode {
					d.visit(p, v)
					d.problem(p, v, "must be a mapping {from: <original name>, to: <new name>}")
					return
				}
				d.object(p, v, schema{fields: map[string]field{
					"from": func(p string, v *yaml.Node) { r.From = d.str(p, v) },
					"to":   func(p string, v *yaml.Node) { r.To = d.str(p, v) },
				}})
				t.Rename = append(t.Rename, r)
			})
		},
	}})
}

// audit decodes telemetry.audit and resolves a relative path against the
// config file's directory.
func (d *decoder) audit(p string, n *yaml.Node, a *Audit) {
	d.object(p, n, schema{fields: map[string]field{
		"enabled":   func(p string, v *yaml.Node) { d.boolean(p, v, &a.Enabled) },
		"path":      func(p string, v *yaml.Node) { a.Path = d.str(p, v) },
		"arguments": func(p string, v *yaml.Node) { a.Arguments = AuditArguments(d.str(p, v)) },
	}})
	if a.Path != "" && d.baseDir != "" && !filepath.IsAbs(a.Path) {
		a.Path = filepath.Join(d.baseDir, a.Path)
	}
}

func (d *decoder) team(p string, n *yaml.Node) (Team, bool) {
	if n.Kind != yaml.MappingNode {
		d.visit(p, n)
		d.problem(p, n, "must be a mapping with a name")
		return Team{}, false
	}
	var t Team
	fields := d.viewFields(&viewFields{&t.Name, &t.Allow, &t.Deny, &t.MaxTools, &t.MaxTokens, nil, &t.Mode})
	maps.Copy(fields, map[string]field{
		"api_keys": func(p string, v *yaml.Node) { t.APIKeys = d.strings(p, v) },
		"search": func(p string, v *yaml.Node) {
			d.object(p, v, schema{fields: map[string]field{
				"expose_found": func(p string, v *yaml.Node) {
					var on bool
					d.boolean(p, v, &on)
					t.Search.ExposeFound = &on
				},
			}})
		},
		"claims": func(p string, v *yaml.Node) {
			if !d.visit(p, v) {
				return
			}
			if v.Kind != yaml.MappingNode {
				d.problem(p, v, "must be a mapping of claim names to lists of values, such as {groups: [data-eng]}")
				return
			}
			t.Claims = map[string][]string{}
			for _, kv := range d.pairs(p, v, 0) {
				if d.exhausted() {
					break
				}
				kp := join(p, kv.key)
				if isNull(kv.value) {
					d.visit(kp, kv.keyNode)
					t.Claims[kv.key] = nil
					continue
				}
				if kv.value.Kind == yaml.ScalarNode {
					t.Claims[kv.key] = []string{d.str(kp, kv.value)}
					continue
				}
				t.Claims[kv.key] = d.strings(kp, kv.value)
			}
		},
		"claims_match": func(p string, v *yaml.Node) { t.ClaimsMatch = ClaimsMatch(d.str(p, v)) },
		"scopes":       func(p string, v *yaml.Node) { t.Scopes = d.strings(p, v) },
		"limits": func(p string, v *yaml.Node) {
			t.Limits = &TeamLimitOverrides{}
			d.object(p, v, schema{fields: map[string]field{
				"per_identity": func(p string, v *yaml.Node) { d.identityLimits(p, v, &t.Limits.PerIdentity) },
				"team":         func(p string, v *yaml.Node) { d.teamLimits(p, v, &t.Limits.Team) },
			}})
		},
	})
	d.object(p, n, schema{fields: fields})
	return t, true
}

// viewFields point at the fields that teams and profiles share: those of
// a view. A nil pointer is a key the kind does not have.
type viewFields struct {
	name                *string
	allow, deny         *[]string
	maxTools, maxTokens *int
	priority            *[]string
	mode                *ViewMode
}

// viewFields returns the decoders of the view keys of a team or profile.
func (d *decoder) viewFields(f *viewFields) map[string]field {
	fields := map[string]field{
		"name":       func(p string, v *yaml.Node) { *f.name = d.str(p, v) },
		"allow":      func(p string, v *yaml.Node) { *f.allow = d.strings(p, v) },
		"deny":       func(p string, v *yaml.Node) { *f.deny = d.strings(p, v) },
		"max_tools":  func(p string, v *yaml.Node) { d.integer(p, v, f.maxTools) },
		"max_tokens": func(p string, v *yaml.Node) { d.integer(p, v, f.maxTokens) },
		"mode":       func(p string, v *yaml.Node) { *f.mode = ViewMode(d.str(p, v)) },
	}
	if f.priority != nil {
		fields["priority"] = func(p string, v *yaml.Node) { *f.priority = d.strings(p, v) }
	}
	return fields
}

// profile decodes one item of profiles.
func (d *decoder) profile(p string, n *yaml.Node) (Profile, bool) {
	if n.Kind != yaml.MappingNode {
		d.visit(p, n)
		d.problem(p, n, "must be a mapping with a name")
		return Profile{}, false
	}
	var pr Profile
	d.object(p, n, schema{fields: d.viewFields(&viewFields{&pr.Name, &pr.Allow, &pr.Deny, &pr.MaxTools, &pr.MaxTokens, &pr.Priority, &pr.Mode})})
	return pr, true
}

// upstreamAuth decodes upstreams[].auth.
func (d *decoder) upstreamAuth(p string, n *yaml.Node, a *UpstreamAuth) {
	d.object(p, n, schema{fields: map[string]field{
		"headers": func(p string, v *yaml.Node) {
			if !d.visit(p, v) {
				return
			}
			if v.Kind != yaml.MappingNode {
				d.problem(p, v, "must be a mapping of header names to {env: VAR} or {file: PATH}")
				return
			}
			a.Headers = map[string]Secret{}
			for _, kv := range d.pairs(p, v, 0) {
				if d.exhausted() {
					break
				}
				a.Headers[kv.key] = d.secret(join(p, kv.key), kv.value, true)
			}
		},
		"oauth":          func(p string, v *yaml.Node) { a.OAuth = d.oauthClient(p, v) },
		"token_exchange": func(p string, v *yaml.Node) { a.TokenExchange = d.oauthClient(p, v) },
	}})
}

// oauthClient decodes an upstream's oauth or token_exchange.
func (d *decoder) oauthClient(p string, n *yaml.Node) *OAuthClient {
	o := &OAuthClient{}
	d.object(p, n, schema{fields: map[string]field{
		"token_url":     func(p string, v *yaml.Node) { o.TokenURL = d.str(p, v) },
		"client_id":     func(p string, v *yaml.Node) { o.ClientID = d.str(p, v) },
		"client_secret": func(p string, v *yaml.Node) { o.ClientSecret = d.secret(p, v, false) },
		"scopes":        func(p string, v *yaml.Node) { o.Scopes = d.strings(p, v) },
		"resource":      func(p string, v *yaml.Node) { o.Resource = d.str(p, v) },
		"audience":      func(p string, v *yaml.Node) { o.Audience = d.str(p, v) },
	}})
	return o
}

// secret decodes {env: VAR} or {file: PATH} (and prefix, for a header):
// the variable is read now, the file when it is used. A secret is never
// written inline, where it would sit in the file and in its history.
func (d *decoder) secret(p string, n *yaml.Node, header bool) Secret {
	var s Secret
	if n.Kind != yaml.MappingNode {
		d.visit(p, n)
		d.problem(p, n, "must be {env: VAR} or {file: PATH}: a secret is not written in gateway.yaml")
		return s
	}
	fields := map[string]field{
		"env":  func(p string, v *yaml.Node) { s.Env = d.str(p, v) },
		"file": func(p string, v *yaml.Node) { s.File = d.str(p, v) },
	}
	if header {
		fields["prefix"] = func(p string, v *yaml.Node) { s.Prefix = d.str(p, v) }
	}
	d.object(p, n, schema{fields: fields})
	switch {
	case s.Env != "" && s.File != "":
		d.problem(p, n, "has both env and file: set exactly one")
	case s.Env == "" && s.File == "":
		d.problem(p, n, "needs env (an environment variable) or file (a path)")
	case s.Env != "":
		v, ok := d.lookup(s.Env)
		if !ok || v == "" {
			d.problem(p+".env", n, "the environment variable %s is not set", s.Env)
		}
		s.Value = v
	case d.baseDir != "" && !filepath.IsAbs(s.File):
		s.File = filepath.Join(d.baseDir, s.File)
	}
	return s
}

// oauth decodes auth.oauth.
func (d *decoder) oauth(p string, n *yaml.Node, o *OAuth) {
	d.object(p, n, schema{fields: map[string]field{
		"resource": func(p string, v *yaml.Node) { o.Resource = d.str(p, v) },
		"issuers": func(p string, v *yaml.Node) {
			d.list(p, v, func(p string, v *yaml.Node) {
				if v.Kind != yaml.MappingNode {
					d.visit(p, v)
					d.problem(p, v, "must be a mapping with an issuer")
					return
				}
				var is Issuer
				d.object(p, v, schema{fields: map[string]field{
					"issuer":     func(p string, v *yaml.Node) { is.Issuer = d.str(p, v) },
					"jwks_url":   func(p string, v *yaml.Node) { is.JWKSURL = d.str(p, v) },
					"audiences":  func(p string, v *yaml.Node) { is.Audiences = d.strings(p, v) },
					"algorithms": func(p string, v *yaml.Node) { is.Algorithms = d.strings(p, v) },
					"introspection": func(p string, v *yaml.Node) {
						in := &Introspection{}
						d.object(p, v, schema{fields: map[string]field{
							"url":           func(p string, v *yaml.Node) { in.URL = d.str(p, v) },
							"client_id":     func(p string, v *yaml.Node) { in.ClientID = d.str(p, v) },
							"client_secret": func(p string, v *yaml.Node) { in.ClientSecret = d.secret(p, v, false) },
						}})
						is.Introspection = in
					},
				}})
				o.Issuers = append(o.Issuers, is)
			})
		},
		"scopes_supported": func(p string, v *yaml.Node) { o.ScopesSupported = d.strings(p, v) },
		"required_scopes":  func(p string, v *yaml.Node) { o.RequiredScopes = d.strings(p, v) },
		"clock_skew":       func(p string, v *yaml.Node) { d.duration(p, v, &o.ClockSkew) },
		"unmatched":        func(p string, v *yaml.Node) { o.Unmatched = Unmatched(d.str(p, v)) },
	}})
}

// path decodes a file path, resolving a relative one against the config
// file's directory.
func (d *decoder) path(p string, n *yaml.Node) string {
	f := d.str(p, n)
	if f != "" && d.baseDir != "" && !filepath.IsAbs(f) {
		f = filepath.Join(d.baseDir, f)
	}
	return f
}

// limits decodes the top-level limits.
func (d *decoder) limits(p string, n *yaml.Node, l *Limits) {
	d.object(p, n, schema{fields: map[string]field{
		"max_sessions":         func(p string, v *yaml.Node) { d.integer(p, v, &l.MaxSessions) },
		"session_idle_timeout": func(p string, v *yaml.Node) { d.duration(p, v, &l.SessionIdleTimeout) },
		"per_identity":         func(p string, v *yaml.Node) { d.identityLimits(p, v, &l.PerIdentity) },
		"team":                 func(p string, v *yaml.Node) { d.teamLimits(p, v, &l.Team) },
	}})
}

func (d *decoder) identityLimits(p string, n *yaml.Node, l *IdentityLimits) {
	d.object(p, n, schema{fields: map[string]field{
		"rate":             func(p string, v *yaml.Node) { l.Rate, _ = d.rate(p, d.str(p, v)) },
		"burst":            func(p string, v *yaml.Node) { d.integer(p, v, &l.Burst) },
		"concurrent_calls": func(p string, v *yaml.Node) { d.integer(p, v, &l.ConcurrentCalls) },
		"sessions":         func(p string, v *yaml.Node) { d.integer(p, v, &l.Sessions) },
		"streams":          func(p string, v *yaml.Node) { d.integer(p, v, &l.Streams) },
	}})
}

func (d *decoder) teamLimits(p string, n *yaml.Node, l *TeamLimits) {
	d.object(p, n, schema{fields: map[string]field{
		"rate":  func(p string, v *yaml.Node) { l.Rate, _ = d.rate(p, d.str(p, v)) },
		"burst": func(p string, v *yaml.Node) { d.integer(p, v, &l.Burst) },
	}})
}

// rate reads a rate written at key path p; a problem is reported there.
func (d *decoder) rate(p, s string) (Rate, bool) {
	r, err := ParseRate(s)
	if err != nil {
		d.problems = append(d.problems, Problem{Path: p, Line: d.lineOf(p), Message: err.Error()})
		return 0, false
	}
	return r, true
}

// join appends a map key to a key path: ".key" for keys made of
// [A-Za-z0-9_-], else `["key"]`, so that any key is unambiguous.
func join(p, key string) string {
	if key != "" && strings.IndexFunc(key, func(r rune) bool {
		return !(r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) < 0 {
		if p == "" {
			return key
		}
		return p + "." + key
	}
	return p + "[" + strconv.Quote(key) + "]"
}

// keyPath is the path suffix of a map key, as join writes it.
func keyPath(key string) string {
	if s := join("", key); !strings.HasPrefix(s, "[") {
		return "." + s
	}
	return join("", key)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
