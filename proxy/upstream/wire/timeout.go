package wire

import "errors"

// isTimeout reports whether err is a timeout, as upstream.IsTimeout does.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
