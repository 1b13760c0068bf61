// Package config loads the gateway's configuration file into one typed
// [Config] and validates it.
//
// The file is gateway.yaml (YAML) or a Claude Desktop style
// claude_desktop_config.json (JSON); both may carry an mcpServers map, so an
// existing desktop config works as a gateway config as it is. [Load] reads a
// file in four steps:
//
//  1. parse the file into YAML nodes (JSON goes through encoding/json), which
//     keeps the case and the order of every key;
//  2. apply MCP_GATEWAY_* environment overrides to scalar settings;
//  3. decode into [Config], expanding ${VAR} in string values and rejecting
//     unknown keys;
//  4. [Config.Validate].
//
// Every problem found along the way is reported, each with the key path it
// belongs to, in one [*ValidationError]. Non-fatal findings, such as a
// deprecated transport, are reported by [Config.Warnings].
//
// # Keys
//
// Unknown keys are errors, with a suggestion when one is close. Two
// exceptions: top-level keys starting with "x-" are ignored, so they can
// hold YAML anchors for reuse with merge keys (<<: *anchor); and a JSON file
// with an mcpServers map may carry a desktop app's own top-level settings
// (globalShortcut, preferences...), which are ignored unless they look like a
// misspelt gateway key.
//
// # Environment
//
// ${VAR} in any string value (list items and map values included, map keys
// excluded) is replaced by the value of the environment variable VAR. A
// variable that is not set is a validation problem, never an empty string.
// Write $${ for a literal ${. Only the ${VAR} form is recognised: $VAR and
// defaults such as ${VAR:-x} are not.
//
// MCP_GATEWAY_<KEY> overrides a scalar setting outside the lists, where <KEY>
// is the key path in upper case with "." replaced by "_": MCP_GATEWAY_LISTEN,
// MCP_GATEWAY_ENDPOINT, MCP_GATEWAY_SEPARATOR, MCP_GATEWAY_PREFIX,
// MCP_GATEWAY_MAX_BODY_BYTES, MCP_GATEWAY_POLICY_MAX_TOOLS,
// MCP_GATEWAY_POLICY_DESCRIPTION_MAX_CHARS, MCP_GATEWAY_AUTH_MODE,
// MCP_GATEWAY_TELEMETRY_LOG_LEVEL, MCP_GATEWAY_TELEMETRY_METRICS,
// MCP_GATEWAY_TELEMETRY_OTLP_ENDPOINT, MCP_GATEWAY_TELEMETRY_AUDIT_ENABLED,
// MCP_GATEWAY_TELEMETRY_AUDIT_PATH and
// MCP_GATEWAY_TELEMETRY_AUDIT_ARGUMENTS. An override wins over the file, is
// taken literally (no ${VAR} expansion), and is ignored when empty. Lists
// (upstreams, mcpServers, teams, allowed_origins, allowed_hosts) cannot be set from the
// environment: use ${VAR} inside the file for the parts that vary.
//
// # Secrets
//
// Values may come from the environment and hold secrets (API keys, tokens),
// so no problem message ever quotes a configured value: messages name the key
// path, the variable and what is expected, never what was found.
package config

import (
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults: the gateway's only ones. [Default] and [Load] apply those of
// the file's keys; where another package's Options have a default for a
// zero value (the server's session limits, the router's list waits, the
// upstream client's limits), it is the constant here.
const (
	DefaultListen          = "127.0.0.1:8080"
	DefaultEndpoint        = "/mcp"
	DefaultSeparator       = "__"
	DefaultMaxBodyBytes    = 4 << 20 // 4 MiB
	MaxMaxBodyBytes        = 1 << 30 // 1 GiB: max_body_bytes may be no larger
	DefaultTimeout         = 60 * time.Second
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 30 * time.Second
	DefaultMaxInFlight     = 256
	DefaultMaxQueue        = 1024
	// DefaultMaxMessageBytes bounds one message from an upstream
	// (max_message_bytes); MaxMaxMessageBytes is the most it may be set to.
	DefaultMaxMessageBytes = 16 << 20 // 16 MiB
	MaxMaxMessageBytes     = 1 << 30  // 1 GiB
	DefaultLogLevel        = "info"
	// DefaultMaxClients and DefaultIdleTimeout bound a per-client
	// upstream's sessions.
	DefaultMaxClients  = 64
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultTaskTTL is how long a task the gateway hands a host is kept
	// from its creation (tasks.ttl), and DefaultMaxTasks how many one
	// identity holds at once (tasks.max_per_identity). MaxTaskTTL and
	// MaxMaxTasks are the most they may be set to.
	DefaultTaskTTL  = time.Hour
	DefaultMaxTasks = 100
	MaxTaskTTL      = 24 * time.Hour
	MaxMaxTasks     = 100000
	// MinTaskAfter and MaxTaskAfter bound tasks.after when it is set: a
	// shorter wait would make nearly every call a task.
	MinTaskAfter = 100 * time.Millisecond
	MaxTaskAfter = time.Hour
	// DefaultMaxExposed is how many found tools search.expose_found adds
	// to one session's or identity's tools/list (the least recently
	// found go first); DefaultMaxExposedCallers how many sessions and
	// identities a replica keeps such a list for (the least recently
	// active forgotten first), and DefaultExposedIdle how long a list
	// is kept unused.
	DefaultMaxExposed        = 32
	DefaultMaxExposedCallers = 10000
	DefaultExposedIdle       = time.Hour
	// DefaultMaxTimeoutFactor times the timeout, at most
	// DefaultMaxTimeoutCap, is a call's longest run while the upstream
	// reports progress (see DefaultMaxTimeout).
	DefaultMaxTimeoutFactor = 10
	DefaultMaxTimeoutCap    = 10 * time.Minute
	// The restarts of an upstream that was lost (Restart).
	DefaultRestartDelay    = 250 * time.Millisecond
	DefaultRestartMaxDelay = 30 * time.Second
	DefaultCrashLimit      = 5
	DefaultCrashWindow     = time.Minute
	// DefaultReconnectMaxDelay is the longest delay between the attempts
	// to reach a URL server (Streamable HTTP or HTTP+SSE) that cannot be
	// reached: short, so that a server started after the gateway is
	// picked up within seconds.
	DefaultReconnectMaxDelay = 5 * time.Second

	// DefaultMaxSessions bounds the live legacy sessions
	// (limits.max_sessions); DefaultSessionIdleTimeout ends one unused for
	// this long (limits.session_idle_timeout).
	DefaultMaxSessions        = 10000
	DefaultSessionIdleTimeout = 30 * time.Minute

	// Defaults of settings gateway.yaml does not have yet.

	// DefaultKeepAlive is the interval of the comment lines that keep an
	// idle SSE stream open through proxies.
	DefaultKeepAlive = 25 * time.Second
	// DefaultBodyTimeout bounds the reading of a request body, from the
	// end of its headers: a host that sends it slower is answered 408 (or
	// its 401) and disconnected.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds each write to a host (an answer, a batch
	// of events on a stream, a line to the stdio host's queue writer): a
	// host that takes nothing for that long is cut off.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultReadHeaderTimeout bounds the reading of a request's
	// headers, and DefaultHTTPIdleTimeout how long a kept-alive
	// connection waits for its next request.
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultHTTPIdleTimeout   = 2 * time.Minute
	// DefaultShutdownTimeout bounds the graceful part of a shutdown;
	// then every connection still open is closed.
	DefaultShutdownTimeout = 10 * time.Second
	// MaxShutdownDelay and MaxShutdownTimeout bound shutdown.delay and
	// shutdown.timeout.
	MaxShutdownDelay   = 5 * time.Minute
	MaxShutdownTimeout = time.Hour
	// DefaultMaxStdioMessage bounds one line from a stdio host, and
	// DefaultStdioQueue the messages waiting for it to read them.
	DefaultMaxStdioMessage = 64 << 20
	DefaultStdioQueue      = 1024
	// DefaultMaxListenURIs bounds the resource URIs one modern
	// subscriptions/listen may subscribe to.
	DefaultMaxListenURIs = 256
	// DefaultListWait bounds how long a call of a name no upstream offers
	// yet waits for the upstreams still in their first start that could
	// offer it. Lists never wait.
	DefaultListWait = 10 * time.Second
	// DefaultListTTL is the ttlMs hint of list results for modern hosts.
	DefaultListTTL = 60 * time.Second
)

// DefaultAllowedHosts are the Host values the MCP endpoint accepts on
// every listener when allowed_hosts is not set, besides the listener's own
// addresses and the machine's host name (server.ListenerHosts adds those).
var DefaultAllowedHosts = []string{"localhost", "127.0.0.1", "::1"}

// DefaultMaxTimeout is the longest a call with the given timeout may run
// while its upstream reports progress, when max_timeout is not set:
// DefaultMaxTimeoutFactor times the timeout, at most DefaultMaxTimeoutCap
// and never less than the timeout.
func DefaultMaxTimeout(timeout time.Duration) time.Duration {
	return max(timeout, min(DefaultMaxTimeoutFactor*timeout, DefaultMaxTimeoutCap))
}

// Config is the whole gateway configuration, the decoded form of gateway.yaml.
//
// A Config from [Load] has every default applied. A Config built in code
// should start from [Default] and must pass [Config.Validate].
type Config struct {
	// Listen is the TCP address the HTTP server binds, as host:port.
	// Key: listen. Default "127.0.0.1:8080" (loopback only). An empty host
	// (":8080") listens on every interface.
	Listen string

	// TLS, when set, makes the listener speak HTTPS (TLS 1.2 or later)
	// with this certificate. Key: tls. Default: not set, plain HTTP
	// (terminate TLS in front of the gateway, or set this).
	TLS *TLS

	// Endpoint is the URL path of the MCP endpoint (POST, GET and DELETE).
	// Key: endpoint. Default "/mcp". It must start with "/" and may not be
	// /healthz, /readyz or /metrics, which the gateway serves itself.
	Endpoint string

	// Separator joins an upstream's name and a tool's original name into the
	// exposed name: <upstream><separator><original>. Key: separator.
	// Default "__". One to four characters from [A-Za-z0-9_-], the only
	// characters an exposed name may contain.
	Separator string

	// Prefix says when exposed names carry the upstream prefix.
	// Key: prefix. Default "always".
	Prefix PrefixMode

	// AllowedOrigins lists the browser Origin values accepted besides
	// loopback origins (http://localhost, http://127.0.0.1, http://[::1], any
	// port), for example "https://app.example.com". Each is scheme://host
	// with an optional :port and nothing else. Key: allowed_origins. Default
	// empty. Requests without an Origin header are not affected.
	AllowedOrigins []string

	// AllowedHosts bounds the Host header of requests to the MCP
	// endpoint, against DNS rebinding: each item is a host name or IP
	// (any port) or host:port (that port only), such as gw.example.com
	// or 10.0.0.5:8080. Key: allowed_hosts. Default empty, which means
	// the loopback names (localhost, 127.0.0.1, ::1), the listen address
	// (on every interface: each interface's address) and the machine's
	// host name; a list replaces that default. Another Host gets 403.
	// /healthz, /readyz and /metrics accept any Host.
	AllowedHosts []string

	// MaxBodyBytes is the largest request body the endpoint reads, in bytes.
	// Key: max_body_bytes. Default 4194304 (4 MiB). Must be > 0 and at
	// most MaxMaxBodyBytes (1 GiB).
	MaxBodyBytes int64

	// Upstreams are the MCP servers behind the gateway. Their order is the
	// priority when a tool-count limit cuts tools: earlier upstreams keep
	// their tools first. Entries of the upstreams list come first, then the
	// mcpServers entries in file order. Key: upstreams (and mcpServers).
	Upstreams []Upstream

	// Policy applies to every session. Key: policy.
	Policy Policy

	// Teams give groups of callers their own view of the catalog. Without
	// teams every caller sees the policy view. Key: teams.
	Teams []Team

	// Profiles are views served on their own paths, <endpoint>/<name>
	// (/mcp/coding), so that different hosts get different catalogs
	// without keys of their own. A profile narrows what its callers'
	// identities may see: a caller on its path sees the tools its team
	// (or the default view) and the profile both allow. Key: profiles.
	Profiles []Profile

	// Auth says how callers authenticate. Key: auth.
	Auth Auth

	// Telemetry configures logs, metrics and traces. Key: telemetry.
	Telemetry Telemetry

	// Limits are the quotas and rate limits of callers. Key: limits.
	Limits Limits

	// Tasks turn long tool calls into tasks the gateway runs. Key: tasks.
	Tasks Tasks

	// State says where the state that replicas share lives. Key: state.
	State State

	// Search configures views in search mode. Key: search.
	Search Search

	// Shutdown says how the gateway stops on SIGTERM. Key: shutdown.
	Shutdown Shutdown

	// Pinning checks definitions against a reviewed lockfile and flags
	// suspicious text. Key: pinning. Default: not set, off.
	Pinning *Pinning

	// Console configures the operator console at /ui. Key: console.
	Console Console
}

// StoreKind names where shared state lives.
type StoreKind string

const (
	// StoreMemory keeps every session, parked call and task in the
	// process: one replica (the default).
	StoreMemory StoreKind = "memory"
	// StoreRedis shares sessions between replicas through Redis, and
	// lets a replica reach the others (see docs/scaling.md).
	StoreRedis StoreKind = "redis"
)

// State says where the state that gateway replicas share lives.
type State struct {
	// Store is memory (default: one replica) or redis (several replicas
	// behind any balancer, no affinity needed). Key: store.
	Store StoreKind
	// Redis is the Redis server of store: redis. Key: redis.
	Redis Redis
	// Key seals legacy session ids and modern request states: 32 random
	// bytes (base64, padded or not, standard or URL alphabet, or 64 hex
	// digits), the same on every replica. Key: key, a secret ({env: VAR}
	// or {file: PATH}). Required with store: redis; with memory, each
	// start makes its own.
	Key Secret
	// PreviousKey is the key before Key, still accepted when opening a
	// session id or request state, never used to seal: set it to the old
	// key while rotating. Key: previous_key, a secret. Optional.
	PreviousKey Secret
}

// Redis is a Redis server.
type Redis struct {
	// URL is redis://[user@]host:port/db or rediss:// (TLS, checked
	// against the system's roots, or CAFile). Key: url. Required with
	// store: redis. A password is not written here: see Password.
	URL string
	// Password is the password (AUTH) of the URL's user, or of the
	// default user. Key: password, a secret. Optional.
	Password Secret
	// CAFile is a PEM file of the CAs that sign the server's certificate
	// (rediss:// only); relative to the config file. Key: ca_file.
	CAFile string
}

// Shutdown says how the gateway stops on SIGTERM (or SIGINT).
type Shutdown struct {
	// Delay is how long the gateway goes on serving after the signal,
	// with /readyz answering 503 and every answer closing its
	// connection, so that a load balancer takes the replica out of
	// rotation before it stops accepting. Key: delay, a Go duration.
	// Default 0s; at most 5m.
	Delay time.Duration
	// Timeout is how long requests in progress may then finish before
	// every connection still open is closed. Key: timeout, a Go
	// duration. Default 10s; more than 0 and at most 1h.
	Timeout time.Duration
}

// TLS is the certificate of the gateway's own listener.
type TLS struct {
	// CertFile is the PEM certificate chain, the server's certificate
	// first. Key: cert_file. Required.
	CertFile string
	// KeyFile is the PEM private key of the certificate. Key: key_file.
	// Required.
	//
	// Both files are read again when either changes (checked at most
	// once per second, at a TLS handshake), so a renewed certificate
	// (cert-manager, certbot) is served without a restart; a pair that
	// does not load keeps the one before, with a warning in the log. A
	// relative path is resolved against the config file's directory.
	KeyFile string
}

// Tasks configure the tasks the gateway runs for hosts: a tools/call
// still running after a while becomes a task, which the host polls for
// its result instead of holding the call open.
type Tasks struct {
	// After, when set, makes a tools/call still running after this long
	// a task the gateway runs: a modern host that declared the
	// io.modelcontextprotocol/tasks extension is answered with a task
	// handle, and a legacy (2025-11-25) host that declared the tasks
	// capability may run any tool of such an upstream as a task (its
	// tools show execution.taskSupport "optional"). Key: after, a Go
	// duration. Default 0s: off. When set, at least 100ms and at most 1h.
	// upstreams[].tasks.after overrides it for one upstream.
	After time.Duration
	// TTL is how long a task, and its result, is kept from its creation;
	// it is also the longest TTL a host may ask for. Key: ttl, a Go
	// duration. Default 1h. Must be greater than 0 and at most 24h.
	TTL time.Duration
	// MaxPerIdentity is how many tasks one identity (in one team)
	// holds at once, on every path (the endpoint's and its profiles')
	// together. Key: max_per_identity. Default 100; at least 1 and at
	// most 100000.
	MaxPerIdentity int
}

// PrefixMode says when exposed names carry the upstream prefix.
type PrefixMode string

const (
	// PrefixAlways prefixes every exposed name: <upstream><separator><tool>.
	PrefixAlways PrefixMode = "always"
	// PrefixOnConflict exposes tools under their original names and prefixes
	// only names that more than one upstream offers.
	PrefixOnConflict PrefixMode = "on_conflict"
)

// Transport is the way the gateway talks to an upstream.
type Transport string

const (
	// TransportStdio runs Command as a subprocess and speaks over its stdin
	// and stdout.
	TransportStdio Transport = "stdio"
	// TransportStreamableHTTP is MCP Streamable HTTP at URL.
	TransportStreamableHTTP Transport = "streamable-http"
	// TransportSSE is the legacy HTTP+SSE transport of MCP 2024-11-05, which
	// Streamable HTTP replaced; supported for servers that offer nothing
	// newer, and reported by [Config.Warnings].
	TransportSSE Transport = "sse"
)

// SessionMode says how many upstream sessions the gateway opens to one
// upstream.
type SessionMode string

const (
	// SessionShared uses one upstream session (one subprocess for stdio) for
	// every host session.
	SessionShared SessionMode = "shared"
	// SessionPerClient opens one upstream session (one subprocess for stdio)
	// per host session, for servers that keep per-user state.
	SessionPerClient SessionMode = "per-client"
)

// Upstream is one MCP server behind the gateway: an entry of the upstreams
// list or of the mcpServers map.
//
// Exactly one of Command (a local server over stdio) and URL (a remote
// server over HTTP) is set.
type Upstream struct {
	// Name identifies the upstream and is the prefix of its exposed names.
	// Key: name. One to 32 characters from [A-Za-z0-9_-], case kept; names
	// must differ in more than letter case. In mcpServers it is the entry's
	// key when that key follows the rule; any other key (Claude Desktop
	// accepts any string, "my.server with spaces") gives a name derived
	// from it (see NameFromKey), and Key keeps the key as written.
	Name string
	// Key is the mcpServers key as written, when Name was derived from it
	// (it broke the name rule); "" otherwise. /readyz and the logs show it.
	Key string

	// Command is the program to run for a stdio upstream, looked up in PATH
	// when it has no slash. Key: command.
	Command string

	// Args are the program's arguments. Key: args.
	Args []string

	// Env adds variables to the subprocess's environment. Key: env. Keys
	// keep their case. The subprocess does not inherit the gateway's whole
	// environment, which may hold the gateway's own secrets: only HOME,
	// LOGNAME, PATH, SHELL, TERM, USER, TMPDIR and LANG, then Env.
	Env map[string]string

	// Cwd is the subprocess's working directory. Key: cwd. A relative path
	// is resolved against the directory of the config file. Default: the
	// gateway's working directory.
	Cwd string

	// URL is the endpoint of an HTTP upstream, http:// or https://.
	// Key: url.
	URL string

	// Transport is "stdio", "streamable-http" or "sse". Key: transport (in
	// mcpServers: type, which also accepts "http" for streamable-http).
	// When omitted it is inferred: stdio with a command, streamable-http
	// with a url; see TransportInferred.
	Transport Transport

	// TransportInferred reports that Transport was not written in the file
	// but inferred from command or url. An upstream client may then fall
	// back from streamable-http to sse when the server only speaks the
	// legacy transport; an explicit transport is used as written.
	TransportInferred bool

	// Headers are sent with every HTTP request to the upstream, for example
	// Authorization: "Bearer ${TOKEN}". Key: headers. Names keep their case.
	// Only for url upstreams.
	Headers map[string]string

	// Auth gives the gateway its own credentials for this upstream: header
	// values from secrets, OAuth client credentials, or a per-user token
	// exchange. Key: auth. Only for url upstreams. The host's own token
	// is never sent to an upstream.
	Auth UpstreamAuth

	// TLS configures the TLS of an https:// upstream: the CAs it is
	// checked against, a client certificate for mutual TLS, the name it
	// is checked for. Key: tls. Default: not set, the system's CAs and
	// no client certificate.
	TLS *UpstreamTLS

	// Timeout bounds each request to this upstream. Key: timeout, a Go
	// duration such as "60s" or "2m". Default 60s. Must be > 0.
	Timeout time.Duration

	// Session is "shared" (one upstream session for all hosts) or
	// "per-client" (one per host session). Key: session. Default "shared".
	Session SessionMode

	// MaxClients bounds the per-client sessions (processes, for stdio) of
	// this upstream; the least recently used of the same identity is
	// closed to make room. Key: max_clients. 0 means DefaultMaxClients
	// (64); negative is an error.
	MaxClients int

	// IdleTimeout closes a per-client session unused for this long. Key:
	// idle_timeout, a Go duration. 0 means DefaultIdleTimeout (10m);
	// negative is an error.
	IdleTimeout time.Duration

	// Required makes /readyz wait for this upstream. Key: required.
	// Default false: an optional upstream that is down only loses its tools.
	Required bool

	// MaxTools caps how many of this upstream's tools are exposed, in the
	// order the upstream lists them. Key: max_tools. 0 means no limit;
	// negative is an error.
	MaxTools int

	// Relay lists the server-to-client requests the gateway relays from
	// this upstream to hosts: "sampling", "elicitation", "roots". Key:
	// relay; nil when the key is absent, and then Relayed gives the
	// default: all three for a Streamable HTTP upstream or a per-client
	// session, none for a shared stdio or HTTP+SSE upstream. `relay: []` relays none. With
	// session: shared the gateway declares exactly these client
	// capabilities to the upstream, so a server that would otherwise ask
	// for, say, roots does not; with per-client each host's own
	// capabilities are passed, less those not relayed. A relayed request
	// goes to the host whose call caused it, and only if that host
	// declared the capability; any other gets an error naming this key.
	Relay []string

	// Tools filters and renames this upstream's tools. Key: tools.
	Tools ToolFilter

	// Breaker stops sending requests to an upstream that keeps failing.
	// Key: breaker.
	Breaker Breaker

	// MaxTimeout is how long a call may run in all while the upstream
	// reports progress on it: each progress notification restarts the
	// call's timeout, up to this. Key: max_timeout, a Go duration. 0
	// means DefaultMaxTimeout(timeout): ten times timeout, at most 10m
	// (and never less than timeout); otherwise it must be at least
	// timeout.
	MaxTimeout time.Duration

	// MaxInFlight bounds the requests in flight at once to this upstream
	// (per session); further calls wait in a queue of MaxQueue, and fail
	// with a clear error when it is full or their timeout passes while
	// they wait. Keys: max_in_flight (0 means DefaultMaxInFlight, 256)
	// and max_queue (0 means DefaultMaxQueue, 1024); negative is an
	// error.
	MaxInFlight, MaxQueue int

	// MaxMessageBytes bounds one message from this upstream, in bytes:
	// a stdio line, a JSON answer body or one SSE event. The gateway
	// buffers at most about this much of a message, and never parses a
	// larger one: an answer over the limit fails its call (a tool call
	// gets an isError result saying the answer exceeded max_message_bytes)
	// and the connection goes on serving the next call. Key:
	// max_message_bytes. 0 means DefaultMaxMessageBytes (16 MiB); at most
	// MaxMaxMessageBytes (1 GiB); negative is an error.
	MaxMessageBytes int64

	// Restart says how a stdio server that exits (or an HTTP+SSE stream
	// that ends) is brought back. Key: restart.
	Restart Restart

	// Tasks override the top-level tasks settings for this upstream.
	// Key: tasks. See TaskAfter.
	Tasks UpstreamTasks

	// Source is the key path that defined this upstream, "upstreams[2]" or
	// "mcpServers.GitHub". Set by Load; problem paths use it. Empty means
	// upstreams[i], i being the index in Config.Upstreams.
	Source string
}

// Secret is a value kept outside gateway.yaml: in an environment variable
// or in a file (such as a Kubernetes secret mounted as a file). Exactly
// one of Env and File is set. Secrets are never logged, nor shown in
// errors, /readyz, metrics or the audit log.
type Secret struct {
	// Env names the environment variable holding the value, read when the
	// config is loaded. Key: env. The variable must be set and not empty.
	Env string
	// File is the path of a file holding the value; surrounding white
	// space (a trailing newline) is trimmed. Key: file. A relative path is
	// resolved against the directory of the config file. The file is read
	// again when it changes (its size or modification time is checked at
	// most once per second), so a rotated secret takes effect without a
	// restart.
	File string
	// Prefix is put before the value, such as "Bearer ". Key: prefix.
	// Only for header values.
	Prefix string
	// Value is the value of Env, set by Load; "" for File.
	Value string `json:"-"`
}

// String names where the secret is, never its value, so that a config
// struct that holds one can be formatted or logged.
func (s Secret) String() string {
	if s.File != "" {
		return "{file: " + s.File + "}"
	}
	return "{env: " + s.Env + "}"
}

// GoString hides the value from %#v.
func (s Secret) GoString() string { return s.String() }

// LogValue hides the value from slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// UpstreamAuth are the gateway's credentials for one upstream
// (upstreams[].auth). At most one of OAuth and TokenExchange is set, and
// then Headers may not set Authorization.
type UpstreamAuth struct {
	// Headers are sent with every HTTP request to the upstream, their
	// values from secrets. Key: headers, a mapping of header names (case
	// kept) to {env: VAR} or {file: PATH}, with an optional prefix.
	Headers map[string]Secret
	// OAuth gets the gateway's own access token for the upstream with the
	// client credentials grant (RFC 6749 section 4.4), sent as
	// Authorization: Bearer. Key: oauth. Tokens are cached and fetched
	// again shortly before they expire, one fetch at a time.
	OAuth *OAuthClient
	// TokenExchange exchanges the token of each host (its validated OAuth
	// access token) at the authorization server for a token meant for
	// this upstream (RFC 8693), sent as Authorization: Bearer. Key:
	// token_exchange. Only with auth.mode oauth. It implies session:
	// per-client: each identity gets its own upstream session, with its
	// own token, cached per identity until it expires. The shared session
	// that lists the upstream's catalog uses a client credentials token
	// of the same client, token_url, resource and audience.
	TokenExchange *OAuthClient
}

// OAuthClient is the gateway as an OAuth client of an authorization
// server, for one upstream.
type OAuthClient struct {
	// TokenURL is the authorization server's token endpoint. Key:
	// token_url. Required.
	TokenURL string
	// ClientID is the gateway's client id there. Key: client_id.
	// Required.
	ClientID string
	// ClientSecret is the client's secret: {env: VAR} or {file: PATH}.
	// Key: client_secret. Required. Sent with HTTP Basic authentication
	// (or in the form, for a server that refuses Basic).
	ClientSecret Secret
	// Scopes are requested in the scope parameter. Key: scopes.
	Scopes []string
	// Resource is sent as the RFC 8707 resource parameter: the upstream's
	// canonical URL, which the token's aud should name. Key: resource.
	Resource string
	// Audience is sent as the audience parameter, a logical name of the
	// upstream for servers that use one (RFC 8693). Key: audience.
	// token_exchange needs resource or audience.
	Audience string
}

// PerClient reports whether u gives each host its own upstream session:
// session: per-client, or token_exchange, which implies it.
func (u *Upstream) PerClient() bool {
	return u.Session == SessionPerClient || u.Auth.TokenExchange != nil
}

// UpstreamTLS is how the gateway reaches an https:// upstream. The files
// are read when the gateway starts the upstream, and again when a reload
// changes its settings; a relative path is resolved against the config
// file's directory.
type UpstreamTLS struct {
	// CAFile is a PEM bundle of the CAs the upstream's certificate must
	// chain to, in place of the system's (a private CA). Key: ca_file.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key,
	// presented to an upstream that asks for one (mutual TLS). Keys:
	// cert_file, key_file; both or neither.
	CertFile, KeyFile string
	// ServerName is the name the upstream's certificate is checked for
	// (and sent as SNI), when it is not the URL's host (an upstream
	// reached by IP). Key: server_name.
	ServerName string
}

// UpstreamTasks override the top-level tasks settings for one upstream.
type UpstreamTasks struct {
	// After replaces tasks.after for this upstream; 0s turns tasks off
	// for it even when tasks.after is set. Key: after, a Go duration;
	// nil when the key is absent. When set above 0, at least 100ms and at
	// most 1h.
	After *time.Duration
}

// TaskAfter returns how long u's tools/call runs before it becomes a
// task: u's own tasks.after when set (even 0, which is off), else
// global, the top-level tasks.after. 0 means never.
func (u *Upstream) TaskAfter(global time.Duration) time.Duration {
	if u.Tasks.After != nil {
		return *u.Tasks.After
	}
	return global
}

// RelayCapabilities are the values Upstream.Relay accepts.
var RelayCapabilities = []string{"sampling", "elicitation", "roots"}

// Relayed returns the capabilities whose server requests the gateway
// relays from u: Relay when the key is set, else the default. A host
// asks its user before it samples or shows an elicitation (the spec's
// human-in-the-loop guidance), so relaying is on by default where it
// costs nothing: on Streamable HTTP upstreams, whose requests travel on
// the stream of the call that caused them, and on per-client sessions.
// On a shared stdio or HTTP+SSE upstream it is off by default, since
// there the server's requests arrive on its one stream, where nothing
// says which call they belong to, and the calls of hosts that declared a
// relayed capability must take turns (SharedStream).
func (u *Upstream) Relayed() []string {
	switch {
	case u.Relay != nil:
		return u.Relay
	case u.SharedStream() && u.Session != SessionPerClient:
		return []string{}
	}
	return slices.Clone(RelayCapabilities)
}

// SharedStream reports whether the server's requests arrive on one
// stream for all calls (stdio, HTTP+SSE) rather than on each call's own
// response stream (Streamable HTTP).
func (u *Upstream) SharedStream() bool {
	return u.Transport == TransportStdio || u.Transport == TransportSSE
}

// ToolFilter selects and renames an upstream's tools by their original names
// (the names the upstream itself uses).
//
// A tool is exposed when it matches an Allow pattern (or Allow is empty) and
// matches no Deny pattern. Patterns use [path.Match] syntax: * matches any
// run of characters, ? one character, [a-z] a class.
type ToolFilter struct {
	// Allow lists glob patterns of tools to keep. Key: allow. Empty keeps
	// all.
	Allow []string
	// Deny lists glob patterns of tools to drop; deny wins over allow.
	// Key: deny.
	Deny []string
	// Rename gives tools other names before the prefix is added.
	// Key: rename, a list of {from, to}.
	Rename []Rename
	// Rates limit calls of tools, by original name, for each identity on
	// its own: "N/s", "N/m" or "N/h"; a call over it gets an isError
	// result saying when to try again. Key: rate. Names keep their case.
	Rates map[string]Rate
	// Descriptions replace the descriptions of tools, by original name,
	// with shorter or clearer ones of the operator's. Key: descriptions.
	// Names keep their case.
	Descriptions map[string]string
}

// Rename gives one tool another name.
type Rename struct {
	// From is the tool's original name, exactly (not a pattern). Key: from.
	From string
	// To is the new name, one to 64 characters from [A-Za-z0-9_-].
	// Key: to.
	To string
}

// Breaker configures an upstream's circuit breaker.
type Breaker struct {
	// Failures is how many consecutive transport failures open the breaker.
	// Key: failures. Default 5. Must be > 0.
	Failures int
	// Cooldown is how long an open breaker rejects requests before it lets
	// one through to probe. Key: cooldown, a Go duration. Default 30s. Must
	// be > 0.
	Cooldown time.Duration
}

// Restart configures the restarts of an upstream that was lost or could
// not be started: after each failure within CrashWindow the delay doubles
// from Delay up to MaxDelay (each varied by up to 20% at random). For a
// stdio server, CrashLimit failures within CrashWindow stop the restarts
// (a crash loop), and /readyz says "crash loop" until the next reload. A
// URL server is tried again for as long as it is configured: a server
// that cannot be reached has not crashed.
type Restart struct {
	// Delay before the first restart. Key: delay. 0 means
	// DefaultRestartDelay (250ms).
	Delay time.Duration
	// MaxDelay is the longest delay. Key: max_delay. 0 means
	// DefaultRestartMaxDelay (30s) for a stdio server and
	// DefaultReconnectMaxDelay (5s) for a URL server.
	MaxDelay time.Duration
	// CrashLimit is how many crashes of a stdio server within
	// CrashWindow stop its restarts. Key: crash_limit. 0 means
	// DefaultCrashLimit (5); negative means never stop. A URL server
	// has no crash limit.
	CrashLimit int
	// CrashWindow. Key: crash_window. 0 means DefaultCrashWindow (1m).
	CrashWindow time.Duration
}

// Policy limits what every session sees.
type Policy struct {
	// MaxTools caps the number of tools in a catalog; upstreams earlier in
	// the list keep theirs first. Key: max_tools. 0 means no limit.
	MaxTools int
	// MaxTokens caps the estimated size of a whole tools/list, in tokens
	// (cl100k_base): tools are kept in priority order while they fit.
	// Key: max_tokens. 0 means no limit.
	MaxTokens int
	// SlimSchemas removes the description, title, examples and $comment
	// keywords inside tool input and output schemas, which only decorate.
	// Key: slim_schemas. Default false.
	SlimSchemas bool
	// Priority lists glob patterns on exposed names: when a limit cuts
	// tools, those matching an earlier pattern are kept first, then the
	// rest in upstream order. Key: priority.
	Priority []string
	// DescriptionMaxChars trims longer tool descriptions to this many
	// characters. Key: description_max_chars. 0 means no limit.
	DescriptionMaxChars int
	// Mode is how the default view lists its tools: full (every tool
	// in tools/list) or search (tools/list holds only the gateway's
	// find_tools, call_tool and describe_tool, which find and call the
	// view's tools; see the README's "Search mode"). Key: mode. Default
	// full; a team without a mode of its own takes this one.
	Mode ViewMode
}

// ViewMode is how a view lists its tools (policy.mode, teams[].mode).
type ViewMode string

const (
	// ModeFull lists every tool of the view.
	ModeFull ViewMode = "full"
	// ModeSearch lists the gateway's search tools instead, through which
	// every tool of the view is found and called.
	ModeSearch ViewMode = "search"
	// ModeAuto lists every tool while they fit the view's max_tokens, and
	// switches the view to search mode, instead of cutting tools, when
	// they do not (and back when they fit again).
	ModeAuto ViewMode = "auto"
)

// DefaultMode is policy.mode when it is not set.
const DefaultMode = ModeFull

// Search configures views in search mode (policy.mode, teams[].mode
// search or auto).
type Search struct {
	// ExposeFound also adds the tools a caller finds with find_tools to
	// that caller's own tools/list, as native tools after the gateway's
	// three, each addition announced with notifications/tools/list_changed,
	// so that hosts keep per-tool consent and annotations: a legacy
	// host's per session, a modern host's per identity and view (with
	// auth.mode none, every modern host of the view is one anonymous
	// identity and shares the list). At most DefaultMaxExposed (32)
	// tools each, the least recently found dropped first. Kept in each
	// replica's memory. Key: expose_found. Default false;
	// teams[].search overrides it.
	ExposeFound bool
}

// TeamSearch overrides search settings for one team.
type TeamSearch struct {
	// ExposeFound overrides search.expose_found for the team's view. Key:
	// expose_found. Not set (the default) takes search.expose_found.
	ExposeFound *bool
}

// Team is a group of callers with its own view of the catalog.
type Team struct {
	// Name identifies the team in logs, metrics and `mcp-gateway tools
	// --team`. Key: name. One to 64 characters from [A-Za-z0-9_-], unique.
	Name string
	// APIKeys are the keys that select this team under auth mode api_key.
	// Key: api_keys. Each is the key itself, usually "${SOME_ENV}", or
	// "sha256:" followed by the 64 hex digits of the SHA-256 of the key, so
	// the file need not hold the secret. A key may belong to one team only.
	APIKeys []string
	// Allow lists glob patterns of EXPOSED names the team may see (after
	// prefixing and renaming). Key: allow. Empty allows all.
	Allow []string
	// Deny lists glob patterns of exposed names the team may not see; deny
	// wins over allow. Key: deny.
	Deny []string
	// MaxTools caps the team's catalog. Key: max_tools. 0 means the policy
	// limit only.
	MaxTools int
	// MaxTokens caps the estimated size of the team's tools/list. Key:
	// max_tokens. 0 means the policy limit only.
	MaxTokens int
	// Mode is how the team's view lists its tools: full or search (see
	// policy.mode). Key: mode. Empty (the default) takes policy.mode.
	Mode ViewMode
	// Search overrides the top-level search settings for the team's view.
	// Key: search.
	Search TeamSearch
	// Limits override the top-level limits for this team's identities,
	// field by field. Key: limits.
	Limits *TeamLimitOverrides
	// Claims select this team for an OAuth token (auth.mode oauth): each
	// key is a claim name, such as groups, or a path into nested claims,
	// such as realm_access.roles (a key is first looked up whole, so a
	// claim named "https://example.com/roles" works as it is), and its
	// list the values that match: a claim that is a string matches when
	// it equals one of them, a list of strings when one of its items
	// does, a number or boolean when its JSON text does ("true"). Key:
	// claims. Teams are tried in their order; the first that matches
	// wins. A team without claims is never selected by a token.
	Claims map[string][]string
	// ClaimsMatch is "any" (the default: one of the claims matches) or
	// "all" (every claim matches). Key: claims_match.
	ClaimsMatch ClaimsMatch
	// Scopes are the OAuth scopes a token must grant, besides
	// auth.oauth.required_scopes, to be let in with this team: a token
	// that selects the team without them gets 403 insufficient_scope.
	// Key: scopes.
	Scopes []string
}

// Profile is a view served on its own path, <endpoint>/<name>. Its
// fields are those of a team's view (teams[]); each narrows what the
// caller's team (or the default view) already allows.
type Profile struct {
	// Name is the last segment of the profile's path. Key: name. One to
	// 64 characters from [a-z0-9-], unique.
	Name string
	// Allow lists glob patterns of EXPOSED names the profile shows; a
	// caller sees only tools both its team and the profile allow. Key:
	// allow. Empty allows all that the team allows.
	Allow []string
	// Deny lists glob patterns of exposed names the profile hides, on top
	// of the team's deny. Key: deny.
	Deny []string
	// MaxTools caps the profile's catalog. Key: max_tools. 0 means the
	// team's and the policy's limits only; a profile never raises them.
	MaxTools int
	// MaxTokens caps the estimated size of the profile's tools/list. Key:
	// max_tokens. 0 means the team's and the policy's limits only.
	MaxTokens int
	// Priority lists glob patterns on exposed names kept first when a
	// limit cuts (see policy.priority), among the tools the caller's team
	// view kept: it never brings back one the team's limits cut. Key:
	// priority. Empty takes policy.priority.
	Priority []string
	// Mode is how the profile lists its tools: full, search or auto (see
	// policy.mode), of those the caller's team view kept (auto searches
	// no tool the team's limits cut). Key: mode. Empty (the default)
	// takes the caller's team's mode, else policy.mode.
	Mode ViewMode
}

// ProfilePath is the URL path of profile name under endpoint:
// <endpoint>/<name>.
func ProfilePath(endpoint, name string) string {
	return strings.TrimSuffix(endpoint, "/") + "/" + name
}

// ProfileResource is the resource URL (RFC 8707) of profile name's path
// under auth.oauth.resource: the resource's scheme and host with the
// path hosts use, ProfilePath(endpoint, name) ("" endpoint:
// DefaultEndpoint), whatever path the resource itself has; RFC 9728 §3.3
// has a client check that the metadata's resource is the URL it used.
// "" for a resource that is not an absolute URL (Validate rejects it).
func ProfileResource(resource, endpoint, name string) string {
	u, err := url.Parse(resource)
	if err != nil || u.Host == "" {
		return ""
	}
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: ProfilePath(endpoint, name)}).String()
}

// ClaimsMatch says how many of a team's claims must match.
type ClaimsMatch string

const (
	ClaimsAny ClaimsMatch = "any"
	ClaimsAll ClaimsMatch = "all"
)

// AuthMode says how callers authenticate.
type AuthMode string

const (
	// AuthNone accepts every caller; keep the listen address on loopback.
	AuthNone AuthMode = "none"
	// AuthAPIKey requires a bearer API key that belongs to one of the teams.
	AuthAPIKey AuthMode = "api_key"
	// AuthOAuth requires a bearer token: an OAuth access token (a JWT)
	// from one of auth.oauth.issuers, or, when teams have api_keys, one
	// of those keys.
	AuthOAuth AuthMode = "oauth"
	// AuthJWT is refused: the name of oauth before it was built.
	AuthJWT AuthMode = "jwt"
)

// Auth configures caller authentication.
type Auth struct {
	// Mode is "none", "api_key" or "oauth". Key: mode. Default "none".
	// api_key needs at least one team with api_keys; oauth needs
	// auth.oauth, and accepts the teams' api_keys too.
	Mode AuthMode
	// OAuth configures the gateway as an OAuth 2.1 resource server
	// (auth.mode oauth). Key: oauth.
	OAuth OAuth
	// Admins are the teams whose callers are console admins: they see
	// every upstream, view and call, and may approve changed
	// definitions. Any other caller sees only its own view. Key: admins.
	Admins []string
}

// Defaults and bounds of auth.oauth.
const (
	// DefaultClockSkew is how far a token's exp, nbf and iat may be off
	// the gateway's clock (auth.oauth.clock_skew); MaxClockSkew the most
	// it may be set to.
	DefaultClockSkew = 60 * time.Second
	MaxClockSkew     = 5 * time.Minute
	// JWKSRefetchInterval paces the fetches of an issuer's keys (or of
	// its discovery document): a token with a key id the gateway has not
	// seen makes it fetch them again; after the first fetch and one more,
	// at most one per interval, so that junk key ids cannot make it
	// hammer the issuer.
	JWKSRefetchInterval = 10 * time.Second
	// OAuthFetchTimeout bounds one fetch of a discovery document or key
	// set; the request waiting for it fails then, and the next may retry.
	OAuthFetchTimeout = 10 * time.Second
	// IntrospectionCacheTTL is how long the gateway keeps an issuer's
	// answer about an opaque token (RFC 7662), active or not, before it
	// asks again; an active token's answer is dropped at its exp if
	// sooner. A revoked token thus passes for at most this long.
	IntrospectionCacheTTL = 30 * time.Second
	// IntrospectionConcurrency bounds the introspection requests the
	// gateway has in flight at once, over all issuers: anyone can send
	// made-up opaque tokens, each a new question to the issuers, and the
	// bound keeps a flood of them from becoming one to the issuers; the
	// requests past it wait (within config.OAuthFetchTimeout) for a slot.
	IntrospectionConcurrency = 16
)

// Upstream credentials (upstreams[].auth).
const (
	// TokenRefreshMargin is how long before it expires an upstream access
	// token is fetched again (at most half its lifetime), so that no
	// request goes out with a token about to lapse.
	TokenRefreshMargin = 30 * time.Second
	// TokenLifetimeUnknown is how long a token whose response gave no
	// expires_in is used before a new one is fetched.
	TokenLifetimeUnknown = 5 * time.Minute
	// TokenFetchTimeout bounds one request to an upstream's token
	// endpoint; the call waiting for it fails then.
	TokenFetchTimeout = 10 * time.Second
)

// DefaultAlgorithms are the JWS algorithms accepted from an issuer that
// lists none; Algorithms every one that may be listed. "none" and the
// HMAC algorithms (HS256...) are never accepted: a resource server holds
// no shared secret, and an HMAC check keyed with a public key is the
// classic key confusion attack.
var (
	DefaultAlgorithms = []string{"RS256", "PS256", "ES256", "EdDSA"}
	Algorithms        = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)

// Unmatched says what a valid token that selects no team gets.
type Unmatched string

const (
	// UnmatchedDefault gives it the default (policy) view.
	UnmatchedDefault Unmatched = "default"
	// UnmatchedDeny refuses it with 403.
	UnmatchedDeny Unmatched = "deny"
)

// OAuth configures the validation of bearer access tokens (JWTs).
type OAuth struct {
	// Resource is the gateway's canonical resource URL, as hosts name it
	// (RFC 8707, RFC 9728), such as https://gw.example.com/mcp: tokens
	// must carry it in aud (or one of the issuer's audiences), and the
	// protected resource metadata names it. A profile's path has its own
	// resource, its URL: this one's scheme and host, then
	// <endpoint>/<name> (ProfileResource). Key: resource. Required.
	Resource string
	// Issuers are the authorization servers whose tokens are accepted.
	// Key: issuers. At least one.
	Issuers []Issuer
	// ScopesSupported are the scopes the protected resource metadata
	// lists. Key: scopes_supported. Default: required_scopes and every
	// team's scopes.
	ScopesSupported []string
	// RequiredScopes must all be granted by every token (its scope or scp
	// claim); a token without them gets 403 insufficient_scope. Key:
	// required_scopes.
	RequiredScopes []string
	// ClockSkew is how far exp, nbf and iat may be off the gateway's
	// clock. Key: clock_skew. Default 60s, at most 5m.
	ClockSkew time.Duration
	// Unmatched is what a valid token that matches no team's claims
	// gets: "default" (the policy view, the default) or "deny" (403).
	// Key: unmatched.
	Unmatched Unmatched
}

// Issuer is one authorization server whose tokens are accepted.
type Issuer struct {
	// Issuer is the issuer identifier, compared exactly with a token's
	// iss, such as https://idp.example.com/realms/main. Key: issuer.
	Issuer string
	// JWKSURL is where the issuer's signing keys are. Key: jwks_url.
	// Default empty: OpenID Connect discovery at
	// <issuer>/.well-known/openid-configuration names it.
	JWKSURL string
	// Audiences are accepted in a token's aud besides auth.oauth.resource,
	// for an issuer that cannot put the resource URL there. Key: audiences.
	Audiences []string
	// Algorithms are the JWS algorithms accepted from this issuer, among
	// RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512 and
	// EdDSA. Key: algorithms. Default RS256, PS256, ES256, EdDSA.
	Algorithms []string
	// Introspection, when set, makes the gateway accept this issuer's
	// opaque access tokens (a bearer credential that is neither a JWT nor
	// a team's API key) by asking the issuer about them (RFC 7662). Key:
	// introspection. Default: not set, and opaque tokens are refused.
	Introspection *Introspection
}

// Introspection is how the gateway asks an issuer about an opaque token
// (RFC 7662 token introspection), as a client of that issuer.
type Introspection struct {
	// URL is the issuer's introspection endpoint. Key: url. Default
	// empty: the introspection_endpoint of the issuer's OpenID Connect
	// discovery document (<issuer>/.well-known/openid-configuration).
	URL string
	// ClientID identifies the gateway to the issuer (HTTP Basic, RFC 6749
	// §2.3.1). Key: client_id. Required.
	ClientID string
	// ClientSecret is the gateway's client secret there. Key:
	// client_secret, {env: VAR} or {file: path}. Required.
	ClientSecret Secret
}

// Telemetry configures logs, metrics and traces.
type Telemetry struct {
	// LogLevel is the least severe level logged: "debug", "info", "warn" or
	// "error". Key: log_level. Default "info". Logs go to stderr as JSON.
	LogLevel string
	// Metrics serves Prometheus text at /metrics. Key: metrics.
	// Default true.
	Metrics bool
	// OTLPEndpoint sends traces and metrics over OTLP/HTTP to this base
	// URL (/v1/traces and /v1/metrics are appended), such as
	// http://otel-collector:4318. Key: otlp_endpoint. Default empty: the
	// standard OTEL_EXPORTER_OTLP_ENDPOINT,
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and
	// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT variables still apply, and
	// without them nothing is sent.
	OTLPEndpoint string
	// Audit writes one record per tools/call, prompts/get and
	// resources/read. Key: audit.
	Audit Audit
}

// AuditArguments says what an audit record tells of a call's arguments.
type AuditArguments string

const (
	// AuditOmit leaves arguments out: they may hold anything, secrets
	// and personal data included.
	AuditOmit AuditArguments = "omit"
	// AuditHash records the SHA-256 of the arguments as sent, so that
	// identical calls can be matched without revealing them.
	AuditHash AuditArguments = "hash"
)

// Audit configures the audit log: one JSON line per tools/call,
// prompts/get and resources/read, with the time, the caller's key id and
// team, the exposed and upstream names, the duration, the outcome and the
// size of the result.
type Audit struct {
	// Enabled turns the audit log on. Key: enabled. Default false.
	Enabled bool
	// Path is the file the records are appended to, created with mode
	// 0600 if missing. Key: path. A relative path is resolved against the
	// directory of the config file, as cwd is. Default empty: stderr,
	// beside the logs (records have "msg":"audit").
	Path string
	// Arguments is "omit" (the default) or "hash" (arguments_sha256, the
	// SHA-256 of the arguments). Key: arguments. Arguments themselves are
	// never recorded.
	Arguments AuditArguments
}

// SlogLevel returns LogLevel as a [slog.Level]; an unknown level is Info.
func (t Telemetry) SlogLevel() slog.Level {
	switch t.LogLevel {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Default returns a Config with every default and no upstreams.
func Default() *Config {
	return &Config{
		Listen:       DefaultListen,
		Endpoint:     DefaultEndpoint,
		Separator:    DefaultSeparator,
		Prefix:       PrefixAlways,
		MaxBodyBytes: DefaultMaxBodyBytes,
		Auth:         Auth{Mode: AuthNone, OAuth: OAuth{ClockSkew: DefaultClockSkew, Unmatched: UnmatchedDefault}},
		Telemetry:    Telemetry{LogLevel: DefaultLogLevel, Metrics: true, Audit: Audit{Arguments: AuditOmit}},
		Tasks:        Tasks{TTL: DefaultTaskTTL, MaxPerIdentity: DefaultMaxTasks},
		State:        State{Store: StoreMemory},
		Shutdown:     Shutdown{Timeout: DefaultShutdownTimeout},
		Policy:       Policy{Mode: DefaultMode},
	}
}

// DefaultUpstream returns an Upstream with the defaults Load applies to every
// entry (timeout, session, breaker). The caller sets the name, command or url,
// and transport.
func DefaultUpstream() Upstream {
	return Upstream{
		Timeout: DefaultTimeout,
		Session: SessionShared,
		Breaker: Breaker{Failures: DefaultBreakerFailures, Cooldown: DefaultBreakerCooldown},
	}
}
