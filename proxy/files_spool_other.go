//go:build !linux

package proxy

import (
	"errors"
	"os"
)

// openAnonymous is not available here: openSpool falls back to a named file.
func openAnonymous(string) (*os.File, error) {
	return nil, errors.New("O_TMPFILE is not supported on this system")
}
