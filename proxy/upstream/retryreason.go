package upstream

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// RetryReason says why a call left a deployment for another one, or was sent
// again to the same one (RetryStale). The zero value, NoRetry, means the
// answer or failure is final.
type RetryReason uint8

// The reasons a call may be retried; see docs/failover.md.
const (
	NoRetry RetryReason = iota
	RetryStale
	RetryConnect
	RetryReset
	RetryTimeout
	Retry429
	Retry500
	Retry502
	Retry503
	Retry504
	Retry529
	NumRetryReasons
)

var retryReasonNames = [NumRetryReasons]string{
	"", "stale_connection", "connect", "reset", "timeout", "429", "500", "502", "503", "504", "529",
}

// String is the reason's metric label.
func (r RetryReason) String() string { return retryReasonNames[r] }

// Unprocessed reports whether the reason proves the upstream did nothing with
// the request: it could not be reached, or it refused for its rate limit. A
// stale connection is not such a proof: the request may have been read
// before the upstream reset the connection.
func (r RetryReason) Unprocessed() bool { return r == RetryConnect || r == Retry429 }

// maxRetryAfter bounds how long a retry-after header may exclude a
// deployment.
const maxRetryAfter = 10 * time.Minute

// Classify returns why the call that Send ended with err (when nil, the
// answer waiting in r) could go again, or NoRetry: RetryStale when it failed
// on a pooled connection that the upstream had closed (see Stale), to be
// sent again to the same deployment after Redial; any other reason, to go
// to another deployment.
func (r *Relay) Classify(err error) RetryReason {
	if err != nil {
		switch {
		case errors.Is(err, ErrAnswerTooLarge):
			return NoRetry // the deployment answered; another would answer alike
		case errors.Is(err, ErrCanceled):
			return NoRetry // the caller left
		case Stale(&r.resp):
			return RetryStale
		case IsDialError(err):
			return RetryConnect
		case errors.Is(err, fasthttp.ErrTimeout) || IsTimeout(err):
			return RetryTimeout
		}
		return RetryReset
	}
	switch r.resp.StatusCode() {
	case 429:
		return Retry429
	case 500:
		return Retry500
	case 502:
		return Retry502
	case 503:
		return Retry503
	case 504:
		return Retry504
	case 529:
		return Retry529
	}
	return NoRetry
}

// Discard drops an answer that Send received and that will not be relayed:
// its deployment's health records it as Begin would, the body is closed
// unread (a streamed one closes its connection) and r is ready for another
// Send of the same call (StaleRetries is kept).
func (r *Relay) Discard() {
	r.judge(r.resp.StatusCode())
	if r.resp.BodyStream() != nil {
		r.resp.CloseBodyStream()
	}
	r.dep.inflight.Add(-1)
	stale := r.StaleRetries
	r.Reset()
	r.StaleRetries = stale
}

// judge records an answer's status in its deployment's health: a server
// failure counts towards exclusion, a 429 or 529 excludes it at once for its
// retry-after, so other calls route around it.
func (r *Relay) judge(status int) {
	switch {
	case status == 429 || status == 529:
		r.dep.ExcludeFor(retryAfter(r.answerHeader("Retry-After"), time.Now(), r.dep.cooldown))
	case FailureStatus(status):
		r.dep.Failed(StatusError(status))
	default:
		r.dep.Succeeded()
	}
}

// answerHeader returns the value of the answer's header name, in whatever
// case the upstream named it: the answer's names are kept as sent (see
// readHead), so fasthttp's Peek would find only the case it is given, and
// a head the transport read itself is not in fasthttp's header at all.
func (r *Relay) answerHeader(name string) (v []byte) {
	r.eachAnswerHeader(func(k, value []byte) bool {
		if len(k) == len(name) && strings.EqualFold(b2s(k), name) {
			v = value
			return false
		}
		return true
	})
	return v
}

// retryAfter reads a retry-after value, delay-seconds or an HTTP date, as a
// duration from now, at most maxRetryAfter; def when there is none.
func retryAfter(v []byte, now time.Time, def time.Duration) time.Duration {
	if len(v) == 0 {
		return def
	}
	if n, err := strconv.ParseUint(b2s(v), 10, 32); err == nil {
		return min(time.Duration(n)*time.Second, maxRetryAfter)
	}
	t, err := fasthttp.ParseHTTPDate(v)
	if err != nil {
		return def
	}
	return min(max(t.Sub(now), 0), maxRetryAfter)
}
