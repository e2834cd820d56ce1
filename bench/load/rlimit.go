package load

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises this process's soft RLIMIT_NOFILE towards want, as
// far as the hard limit allows, and returns the soft limit now in force. It
// returns an error wrapping ErrFileLimit, with both limits, when the hard
// limit is below want: raising it needs privileges this process may lack
// (ulimit -Hn, or LimitNOFILE= of a systemd unit).
func RaiseFileLimit(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("cannot read RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur < want && lim.Cur < lim.Max {
		lim.Cur = min(want, lim.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, fmt.Errorf("cannot raise RLIMIT_NOFILE to %d: %w", lim.Cur, err)
		}
	}
	if lim.Cur < want {
		return lim.Cur, fmt.Errorf("need %d open files, hard limit is %d: %w", want, lim.Max, ErrFileLimit)
	}
	return lim.Cur, nil
}
