//go:build !linux

package upstream

import "net"

// stillOpen cannot peek on this platform: a connection the server closed
// while idle fails its next request instead.
func stillOpen(net.Conn) bool { return true }
