package redistest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// setDeathSignal kills the server when the test process dies, so no redis-server outlives a
// crashed or killed test run.
func setDeathSignal(cmd *exec.Cmd) {
	if os.Getenv("SRQ_NO_PDEATHSIG") != "" {
		return
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// tell writes msg to stderr. When hidden is true the run passed without -v, and "go test" with
// package arguments (go test ./...) then prints only its "ok" line, dropping what the binary
// wrote: so tell also writes msg to the standard error of the go command that runs this binary,
// when that is a terminal or a pipe and not where this binary's own stderr goes. It never writes
// to a regular file it did not open: appending there behind the go command's back could be
// overwritten by it.
func tell(msg string, hidden bool) {
	_, _ = os.Stderr.WriteString(msg)
	if !hidden {
		return
	}
	parent := "/proc/" + strconv.Itoa(os.Getppid())
	if exe, err := os.Readlink(parent + "/exe"); err != nil || filepath.Base(exe) != "go" {
		return
	}
	mine, err := os.Stderr.Stat()
	if err != nil {
		return
	}
	for _, fd := range []string{"/fd/1", "/fd/2"} {
		if fi, err := os.Stat(parent + fd); err != nil || os.SameFile(fi, mine) {
			return // our output is the go command's: it was printed already
		}
	}
	fi, err := os.Stat(parent + "/fd/2")
	if err != nil || fi.Mode()&(fs.ModeNamedPipe|fs.ModeCharDevice) == 0 {
		return
	}
	f, err := os.OpenFile(parent+"/fd/2", os.O_WRONLY, 0)
	if err != nil {
		return
	}
	_, _ = f.WriteString(msg)
	_ = f.Close()
}
