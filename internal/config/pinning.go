package config

import "path/filepath"

// DefaultLockfile is the lockfile's name, beside the config file, when
// pinning.lockfile is not set.
const DefaultLockfile = "tools.lock"

// PinMode says what a definition that differs from the lockfile does.
type PinMode string

const (
	// PinEnforce quarantines it: it leaves every view and calls to it
	// get the unknown-tool error (the default).
	PinEnforce PinMode = "enforce"
	// PinWarn logs and counts it, and leaves it listed.
	PinWarn PinMode = "warn"
)

// NewTools says what a definition absent from the lockfile does.
type NewTools string

const (
	NewToolsAllow      NewTools = "allow"      // listed (the default)
	NewToolsQuarantine NewTools = "quarantine" // quarantined in enforce mode
)

// SuspiciousAction says what a definition with invisible or deceptive
// text does.
type SuspiciousAction string

const (
	SuspiciousFlag       SuspiciousAction = "flag"       // logged and listed in /readyz (the default)
	SuspiciousQuarantine SuspiciousAction = "quarantine" // quarantined, in either mode
)

// Pinning checks tool, prompt and resource definitions, and each
// upstream's instructions, against the reviewed ones in a lockfile
// (written by `mcp-gateway pin`), and flags suspicious text in them.
type Pinning struct {
	// Lockfile is the lockfile's path, relative to the config file. Key:
	// lockfile. Default tools.lock beside the config file. Under mode
	// enforce it must exist when the gateway starts.
	Lockfile string
	// Mode is enforce (a definition that differs from the lockfile is
	// quarantined) or warn (it is logged and counted, and stays). Key:
	// mode. Default enforce.
	Mode PinMode
	// NewTools is allow (definitions absent from the lockfile are
	// listed) or quarantine (they are quarantined in enforce mode, and
	// reported in warn mode). Key: new_tools. Default allow.
	NewTools NewTools
	// Suspicious is flag (definitions with invisible or deceptive text
	// are logged and listed in /readyz) or quarantine (they are also
	// quarantined, whatever the mode). Key: suspicious. Default flag.
	Suspicious SuspiciousAction
}

// DefaultPinning is pinning's defaults, with the lockfile beside a config
// file in dir ("" leaves it relative).
func DefaultPinning(dir string) *Pinning {
	lock := DefaultLockfile
	if dir != "" {
		lock = filepath.Join(dir, DefaultLockfile)
	}
	return &Pinning{Lockfile: lock, Mode: PinEnforce, NewTools: NewToolsAllow, Suspicious: SuspiciousFlag}
}

func (p *Pinning) validate(ps *problems) {
	if p == nil {
		return
	}
	if p.Lockfile == "" {
		ps.add("pinning.lockfile", "must be a file path, such as tools.lock (relative to the config file)")
	}
	if p.Mode != PinEnforce && p.Mode != PinWarn {
		ps.add("pinning.mode", "must be enforce or warn")
	}
	if p.NewTools != NewToolsAllow && p.NewTools != NewToolsQuarantine {
		ps.add("pinning.new_tools", "must be allow or quarantine")
	}
	if p.Suspicious != SuspiciousFlag && p.Suspicious != SuspiciousQuarantine {
		ps.add("pinning.suspicious", "must be flag or quarantine")
	}
}
