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
// docs/failover.md describes; a call that failed on a pooled connection the
// upstream had closed goes again, once, to the same deployment on a new
// connection. A streamed answer is never retried once it began: relay is
// called for the one answer that reaches the client. again decides every
// call sent again, by the endpoint's retry class; nothing else resends.

// retryClass says which failures of an endpoint may be sent again.
type retryClass uint8

const (
	// retryNone: never; the call is not forwarded.
	retryNone retryClass = iota
	// retryUnprocessed: only failures that prove the upstream did nothing
	// (no connection, 429): the call changes state upstream.
	retryUnprocessed
	// retryAny: any failure before the first byte; the call has no effect
	// upstream that a second one would duplicate.
	retryAny
)

// retryClasses is the table of docs/failover.md. A call bound to one
// deployment (a Responses continuation or read) has no other to go to: its
// class decides only whether it goes again after a stale connection.
var retryClasses = [numEndpoints]retryClass{
	epMessages:             retryAny,
	epChat:                 retryAny,
	epImages:               retryAny,
	epResponsesInputTokens: retryAny,
	epGenerateContent:      retryAny,
	epResponsesGet:         retryAny,
	epResponsesInputItems:  retryAny,
	epResponsesCreate:      retryUnprocessed,
	epResponsesCompact:     retryUnprocessed,
	epResponsesDelete:      retryUnprocessed,
}

// mayRetry reports whether a failure for reason may be sent again on the
// call's endpoint.
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
// the answer; see try.
func (c *call) forward(r *upstream.Route, path string, body []byte, stream bool) {
	if !c.reserveRenamed(body) || !c.admit() {
		return
	}
	i, dep := r.Pick(c.sessionHash, c.hasSession, 0)
	if (dep == nil || dep.ExcludedNow()) && c.hasFallback() {
		// Every deployment of the model is excluded: a fallback model's may not be.
		if fr, fi, fdep := c.fallBack(len(body)); fdep != nil {
			r, i, dep = fr, fi, fdep
		}
	}
	c.try(r, i, dep, path, body, stream)
}

// try sends the request to dep, r's choice i (r is nil, and i -1, for a call
// bound to dep), and relays the answer. A failure that again lets go again
// goes to the deployment it names; when none is left, the last answer
// reaches the client as it was.
func (c *call) try(r *upstream.Route, i int, dep *upstream.Deployment, path string, body []byte, stream bool) {
	var tried affinity.Set
	for dep != nil {
		tried = tried.With(i)
		c.attempts++
		err := c.send(dep, path, body, stream)
		reason := c.up.Classify(err)
		nextR, next, nextDep := c.again(r, tried, i, dep, reason, len(body))
		if nextDep == nil {
			c.answer(err)
			return
		}
		c.traceRetry(reason, err)
		if err == nil {
			c.up.Discard()
		}
		if nextR != r {
			tried = 0 // a fallback model's route
		}
		r, i, dep = nextR, next, nextDep
	}
	c.fail(&Error{Status: 502, Reason: "upstream_unreachable", Message: "no upstream deployment could be reached"})
}

// again is the one place that decides whether a call sent to dep (r's
// choice i) that failed for reason is sent again, and where: nil when it is
// not. The endpoint's retry class must allow the reason (see mayRetry),
// within retry.attempts and dep's retry budget, which the retry spends. A
// stale connection (RetryStale) goes again to dep on a connection dialled
// for it, once a call; any other reason to r's next choice, or, when r has
// none left but excluded ones and the reason allows (fallsBack), to the
// first choice of the next fallback model's route, which it returns with the
// choice.
func (c *call) again(r *upstream.Route, tried affinity.Set, i int, dep *upstream.Deployment, reason upstream.RetryReason, bodyLen int) (*upstream.Route, int, *upstream.Deployment) {
	stale := reason == upstream.RetryStale
	switch {
	case !c.mayRetry(reason) || c.attempts >= c.st.cfg.Retry.Attempts:
		return nil, -1, nil
	case stale && c.up.StaleRetries > 0, !stale && r == nil:
		return nil, -1, nil
	}
	now := time.Now().Unix()
	rc := &c.st.cfg.Retry
	if !dep.Budget.Allows(now, rc.BudgetPercent, rc.BudgetMinPerSecond) {
		dep.Stats.Refused()
		return nil, -1, nil
	}
	next, nextDep := i, dep
	if stale {
		c.up.Redial()
	} else if next, nextDep = r.Pick(c.sessionHash, c.hasSession, tried); nextDep == nil || nextDep.ExcludedNow() {
		// No deployment of the model is left, or only excluded ones.
		if fallsBack(reason) && c.hasFallback() {
			if fr, fn, fdep := c.fallBack(bodyLen); fdep != nil {
				r, next, nextDep = fr, fn, fdep
			}
		}
		if nextDep == nil {
			return nil, -1, nil
		}
	}
	dep.Budget.Spend(now)
	dep.Stats.Retried(reason)
	return r, next, nextDep
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
