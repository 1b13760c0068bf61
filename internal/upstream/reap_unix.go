//go:build unix && !linux

package upstream

import "os/exec"

// reap waits for the child to exit and reaps it, then kills what is left
// of its process group: helpers it started, which would otherwise outlive
// it as orphans. (Unlike on Linux, the group's id is free for reuse
// between the two, a risk of microseconds.)
func reap(cmd *exec.Cmd) error {
	err := cmd.Wait()
	killGroup(cmd)
	return err
}
