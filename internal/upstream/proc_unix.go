//go:build unix

package upstream

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup makes the child lead a process group of its own, so that
// shutdown signals reach the processes it starts too.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminate sends SIGTERM to the child's process group.
func terminate(cmd *exec.Cmd) { signalGroup(cmd, syscall.SIGTERM) }

// kill sends SIGKILL to the child's process group.
func kill(cmd *exec.Cmd) { signalGroup(cmd, syscall.SIGKILL) }

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		_ = cmd.Process.Signal(sig) // not a group leader after all
	}
}

// killGroup sends SIGKILL to the child's process group once the child
// has exited; there may be nobody left.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
