//go:build linux

package upstream

import (
	"os/exec"
	"syscall"
	"unsafe"
)

// reap waits for the child to exit and reaps it, after killing what is
// left of its process group: helpers it started, which would otherwise
// outlive it as orphans. The group is killed between the exit and the
// reaping, while the unreaped child still holds its process id (which is
// the group's id), so that the id cannot have passed to another process.
func reap(cmd *exec.Cmd) error {
	waitExited(cmd.Process.Pid)
	killGroup(cmd)
	return cmd.Wait()
}

// waitExited blocks until process pid has exited, without reaping it:
// waitid(P_PID, pid, WEXITED|WNOWAIT), as os.Process does internally
// (os/wait_waitid.go).
func waitExited(pid int) {
	const (
		pPID    = 1         // P_PID
		wNOWAIT = 0x1000000 // WNOWAIT
	)
	// The kernel writes a siginfo_t, 128 bytes.
	var siginfo [16]uint64
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&siginfo[0])), syscall.WEXITED|wNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}
