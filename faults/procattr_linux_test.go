package faults_test

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills a worker process when the test process dies, so none outlives a crashed run.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
