package proxy

import (
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/affinity"
	"github.com/modelgate/gateway/proxy/upstream"
)

// Failover: a call whose deployment fails before the first answer byte
// reached the client goes to the next deployment of its ring order, as
// docs/failover.md describes. A streamed answer is never retried once it
// began: relay is called for the one answer that reaches the client.

// retryClass says which failures of an endpoint may go to another deployment.
type retryClass uint8

const (
	// retryNone: never; the call names one deployment or is not forwarded.
	retryNone retryClass = iota
	// retryUnprocessed: only failures that prove the upstream did nothing
	// (no connection, 429): the call changes state upstream.
	retryUnprocessed
	// retryAny: any failure before the first byte; the call has no effect
	// upstream that a second one would duplicate.
	retryAny
)

// retryClasses is the table of docs/failover.md.
var retryClasses = [numEndpoints]retryClass{
	epMessages:             retryAny,
	epChat:                 retryAny,
	epImages:               retryAny,
	epResponsesInputTokens: retryAny,
	epGenerateContent:      retryAny,
	epResponsesCreate:      retryUnprocessed,
	epResponsesCompact:     retryUnprocessed,
	epResponsesDelete:      retryUnprocessed,
}

// mayRetry reports whether a failure for reason may leave for another
// deployment on the call's endpoint.
func (c *call) mayRetry(reason upstream.RetryReason) bool {
	switch retryClasses[c.ep] {
	case retryAny:
		return reason != upstream.NoRetry
	case retryUnprocessed:
		return reason.Unprocessed()
	}
	return false
}

// forward sends the request to a deployment of r chosen by key and relays
// the answer. A failure that may be retried (see mayRetry) goes to the next
// choice, within retry.attempts and the failed deployment's retry budget;
// when none is left, the last answer reaches the client as it was.
func (c *call) forward(r *upstream.Route, path string, body []byte, stream bool) {
	if !c.reserveRenamed(body) || !c.admit() {
		return
	}
	var tried affinity.Set
	i, dep := r.Pick(c.sessionHash, c.hasSession, tried)
	for dep != nil {
		tried = tried.With(i)
		c.attempts++
		err := c.send(dep, path, body, stream)
		reason := c.up.Classify(err)
		if !c.mayRetry(reason) || c.attempts >= c.st.cfg.Retry.Attempts {
			c.answer(err)
			return
		}
		next, nextDep := c.nextChoice(r, tried, dep, reason)
		if nextDep == nil {
			c.answer(err)
			return
		}
		if err == nil {
			c.up.Discard()
		}
		i, dep = next, nextDep
	}
	c.fail(&Error{Status: 502, Reason: "upstream_unreachable", Message: "no upstream deployment could be reached"})
}

// nextChoice returns the deployment a call that failed on dep for reason
// goes to next, and spends a retry of dep's budget; nil when there is none
// or the budget is spent.
func (c *call) nextChoice(r *upstream.Route, tried affinity.Set, dep *upstream.Deployment, reason upstream.RetryReason) (int, *upstream.Deployment) {
	now := time.Now().Unix()
	rc := &c.st.cfg.Retry
	if !dep.Budget.Allows(now, rc.BudgetPercent, rc.BudgetMinPerSecond) {
		dep.Stats.Refused()
		return -1, nil
	}
	i, next := r.Pick(c.sessionHash, c.hasSession, tried)
	if next == nil {
		return -1, nil
	}
	dep.Budget.Spend(now)
	dep.Stats.Retried(reason)
	return i, next
}

// answer relays the answer of the last send, or answers its error.
func (c *call) answer(err error) {
	if err != nil && upstream.IsDialError(err) && !errors.Is(err, fasthttp.ErrNoFreeConns) {
		// A dial error names only the address: the access log may carry it.
		c.fail(&Error{Status: 502, Reason: "upstream_unreachable", Message: "no upstream deployment could be reached",
			Cause: fmt.Errorf("%s: %w", c.dep.Name(), err)})
		return
	}
	if err != nil {
		c.fail(upstreamError(err))
		return
	}
	c.relay()
}
