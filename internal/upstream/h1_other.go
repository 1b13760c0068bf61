//go:build !linux

package upstream

import "net"

// canPeek: stillOpen cannot peek on this platform; idle connections are
// watched by a reader goroutine each (h1Transport.watchIdle).
const canPeek = false

// stillOpen is not used where canPeek is false.
func stillOpen(net.Conn) bool { return true }
