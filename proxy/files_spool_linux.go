package proxy

import (
	"os"

	"golang.org/x/sys/unix"
)

// openAnonymous opens a file in dir that has no name (O_TMPFILE): it cannot outlive the
// process, however the process ends.
func openAnonymous(dir string) (*os.File, error) {
	return os.OpenFile(dir, os.O_RDWR|unix.O_TMPFILE, 0o600)
}
