//go:build !unix

package upstream

import "os/exec"

// ownProcessGroup does nothing where there are no POSIX process groups.
func ownProcessGroup(*exec.Cmd) {}

// terminate has no gentler signal than kill to send here.
func terminate(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

func kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// reap waits for the child to exit and reaps it.
func reap(cmd *exec.Cmd) error { return cmd.Wait() }
