//go:build linux

package upstream

import (
	"net"
	"syscall"
)

// canPeek: stillOpen works here.
const canPeek = true

// stillOpen reports whether an idle connection can carry a request: the
// server has neither closed it (a keep-alive timeout) nor sent anything
// on it. It peeks without blocking, in one system call.
func stillOpen(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true // never wait for readiness
	})
	return err == nil && open
}
