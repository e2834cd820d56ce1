package proxy

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/affinity"
	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/clientconn"
	"github.com/modelgate/gateway/proxy/upstream"
)

// Forward: everything a call does once intake.go resolved its route, in the
// order it does it. forward admits the call by its key's limits (limits.go)
// and picks a deployment; try sends it there (send), and again decides
// whether a failure goes elsewhere; answer relays the last answer (relay,
// begin) or answers its error. A streamed answer outlives the handler: the
// call is then the answer's body reader (Read, WriteTo), and Close ends it.
//
// Failover: a call whose deployment fails before the first answer byte
// reached the client goes to the next deployment of its ring order, as
// docs/failover.md describes; a call that failed on a pooled connection the
// upstream had closed goes again, once, to the same deployment on a new
// connection. A streamed answer is never retried once it began: relay is
// called for the one answer that reaches the client. again decides every
// call sent again, by the endpoint's retry class; nothing else resends.

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

// forwardTo sends the request to one given deployment (the one that holds a
// Responses object) and relays the answer; see try.
func (c *call) forwardTo(dep *upstream.Deployment, path string, body []byte, stream bool) {
	if !c.reserveRenamed(body) || !c.admit() {
		return
	}
	c.try(nil, -1, dep, path, body, stream)
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
	case !c.mayRetry(reason) || int(c.attempts) >= c.st.cfg.Retry.Attempts:
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

// sendSecond is the Unix second an attempt is sent in, for the retry budget:
// the call's start for the first, which the server read just before the
// handler; the clock for one sent again, which may come long after.
func (c *call) sendSecond() int64 {
	if c.attempts <= 1 {
		return c.start.Unix()
	}
	return time.Now().Unix()
}

// send makes the upstream call; on success the deployment's in-flight count
// stays raised until the answer is relayed.
func (c *call) send(dep *upstream.Deployment, path string, body []byte, stream bool) error {
	c.dep = dep
	ask := stream && c.asksUsage()
	pm, renamed := c.providerModel(dep)
	if renamed {
		var err error
		if path, body, err = c.rename(pm, path, body, ask); err != nil {
			return err
		}
	}
	if ask && !renamed {
		c.renamed = parse.AppendAskingUsage(orSpare(c.renamed), c.body, &c.fields, nil)
		body = c.renamed
	}
	c.traceAttempt(dep)
	req := upstream.AcquireRequest()
	req.Head = c.appendHead(req.Head, dep, path, len(body))
	req.Body = body
	req.Cancel = &c.cancel
	c.watchClient()
	if c.countsUsage() {
		c.up.CountUsage()
	}
	if ask {
		c.up.StripUsage()
	}
	c.sent = true
	err := c.up.Send(dep, req, stream, c.sendSecond())
	c.reached = err == nil || !upstream.IsDialError(err)
	// The request is written whole by the time Send returns; a long stream
	// should not keep its head alive.
	upstream.ReleaseRequest(req)
	return err
}

// rename gives the path and body for a deployment that knows the call's model
// as pm: the model's value in the body replaced (a body without a model, such
// as a continuation's, gets none added), or the gamma path rebuilt. ask: the
// body also asks for its stream's usage (see asksUsage).
func (c *call) rename(pm providerModel, path string, body []byte, ask bool) (string, []byte, error) {
	switch {
	case c.ep == epGenerateContent:
		c.renamed = appendGammaPath(orSpare(c.renamed), c.version, pm.name)
		return b2s(c.renamed), body, nil
	case ask:
		c.renamed = parse.AppendAskingUsage(orSpare(c.renamed), c.body, &c.fields, pm.json)
		return path, c.renamed, nil
	case len(body) == 0 || c.fields.Model == nil:
		return path, body, nil
	case !c.inlined:
		// The client's body, with or without its session_id: both come from one pass.
		// Grown at once to what reserveRenamed reserved, the copy takes no more.
		c.renamed = parse.AppendForUpstream(slices.Grow(orSpare(c.renamed), c.shares.renamed), c.body, &c.fields, pm.json)
		return path, c.renamed, nil
	}
	// Another body (alpha messages with inlined files): find its model first.
	var f parse.Fields
	if err := parse.Peek(body, &f); err != nil {
		return path, body, errRename
	}
	c.renamed = parse.AppendForUpstream(slices.Grow(orSpare(c.renamed), c.shares.renamed), body, &f, pm.json)
	return path, c.renamed, nil
}

// errRename is a body the gateway built that it cannot read back: a bug.
var errRename = errors.New("proxy: cannot put the deployment's model name in the body")

// watchClient has the client's leaving cancel the upstream call (see
// clientconn.Conn.WatchPeer), once per call: every send of a failover shares the
// watch, which ends when the call is released.
func (c *call) watchClient() {
	if c.client != nil {
		return
	}
	if cc, ok := c.ctx.Conn().(*clientconn.Conn); ok {
		c.client = cc
		cc.WatchPeer(&c.watch, &c.cancel)
	}
}

// noteClientGone makes the outcome of a call whose client left before its
// answer was relayed whole a 499, whatever the upstream answered: the watch
// canceled the upstream call, or a write to the client failed.
func (c *call) noteClientGone() {
	if c.client == nil || c.status == statusClientGone {
		return
	}
	if c.cancel.Canceled() || c.client.WriteFailed() {
		c.status, c.reason, c.cause = statusClientGone, "client_gone", nil
	}
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

// upstreamError maps a failed upstream call to the client's error. Its cause
// is redacted: fasthttp's text for an answer it could not parse quotes the
// answer's bytes.
func upstreamError(err error) *Error {
	if errors.Is(err, upstream.ErrCanceled) {
		return errClientGone(err)
	}
	if errors.Is(err, fasthttp.ErrNoFreeConns) {
		return &Error{Status: 503, Reason: "upstream_busy", RetryAfter: 1, Cause: err,
			Message: "busy: every connection to the upstream provider is in use; retry shortly"}
	}
	if errors.Is(err, upstream.ErrAnswerTooLarge) {
		return &Error{Status: 502, Reason: "upstream_too_large", Cause: err,
			Message: "the upstream answer is larger than the gateway's limit"}
	}
	if errors.Is(err, fasthttp.ErrTimeout) || upstream.IsTimeout(err) {
		return &Error{Status: 504, Reason: "upstream_timeout", Message: "the upstream provider did not answer in time", Cause: redacted{err}}
	}
	if errors.Is(err, errRename) {
		return &Error{Status: 500, Reason: "rename_error", Message: "the gateway could not prepare the upstream request", Cause: err}
	}
	return &Error{Status: 502, Reason: "upstream_error", Message: "the upstream provider failed to answer", Cause: redacted{err}}
}

// statusClientGone is the status a call that its client left ends with, in
// the access log and metrics (nginx's and Caddy's 499).
const statusClientGone = 499

// errClientGone is the end of a call whose client left before its answer:
// no client reads it.
func errClientGone(cause error) *Error {
	return &Error{Status: statusClientGone, Reason: "client_gone", Cause: cause,
		Message: "the client closed the connection before the answer"}
}

// relay writes the upstream answer to the client: headers at once, then the
// body, buffered when it was read whole, else streamed by the relay.
func (c *call) relay() {
	out := &c.ctx.Response
	if err := c.up.Load(out, c.st.cfg.Limits.MaxResponseBytes, c.onAnswer != nil); err != nil {
		c.fail(upstreamError(err))
		return
	}
	c.begin(out)
	c.setRequestIDHeader()
	c.setServedModel()
	if !c.up.Streamed() {
		body := out.Body()
		if c.onAnswer != nil && !c.onAnswer(c, body) {
			return
		}
		c.firstByte = c.clock()
		c.bytesOut = int64(len(body))
		return
	}
	c.dropLargeBodies()
	var tap upstream.Tap
	if c.onStream != nil {
		tap = c
	}
	size := c.up.Stream(out, c.family, c.ep == epResponsesCreate, tap)
	if cc, ok := c.ctx.Conn().(*clientconn.Conn); ok {
		c.up.SetTail(cc)
	}
	c.done = true // ownership passes to the body stream: Close releases the call
	c.g.streamStarted(c)
	if c.hijackStream(size) {
		return // written from a goroutine of its own: see hijack.go
	}
	out.SetBodyStream(c, size)
}

// begin copies the answer's status and headers to out: a stream's and a
// small whole answer's through the client's connection (see
// clientconn.Conn.TakeSplice), a larger one's header by header.
func (c *call) begin(out *fasthttp.Response) {
	if c.up.Streamed() || len(out.Body()) <= clientconn.SpliceMaxBody {
		if cc, ok := c.ctx.Conn().(*clientconn.Conn); ok {
			if lines := cc.TakeSplice(); lines != nil {
				var ok bool
				name, value := clientconn.SpliceMark()
				c.status, lines, ok = c.up.BeginLines(out, lines, name, value)
				cc.TookSplice(lines, ok)
				return
			}
		}
	}
	c.status = c.up.Begin(out)
}

// dropLargeBodies lets go of the request body's copies past maxHeldBody once
// the request is sent: a stream may last minutes, and should not hold a large
// prompt it no longer needs. Small ones stay with the pooled call. The
// peeked fields point into the body: they go with it.
func (c *call) dropLargeBodies() {
	c.bodyLen = len(c.body)
	if cap(c.body) > maxHeldBody {
		c.body = nil
		c.fields.Reset()
		c.releaseShare(&c.shares.body)
	}
	if cap(c.spliced) > maxHeldBody {
		c.spliced = nil
		c.releaseShare(&c.shares.spliced)
	}
	if cap(c.renamed) > maxHeldBody {
		c.renamed = nil
		c.releaseShare(&c.shares.renamed)
	}
}

// A streamed answer is the body of the client's response: fasthttp reads it
// through the call, which hands the reading to its upstream.Relay and is
// released when fasthttp closes the body.

// Read relays the upstream body (see upstream.Relay.Read).
func (c *call) Read(p []byte) (int, error) { return c.up.Read(p) }

// SupportsBodyWriteTo tells fasthttp to relay the body with WriteTo when the
// relay prefers it (fixed-size and SSE bodies).
func (c *call) SupportsBodyWriteTo() bool { return c.up.SupportsBodyWriteTo() }

// WriteTo relays the upstream body to w (see upstream.Relay.WriteTo).
func (c *call) WriteTo(w io.Writer) (int64, error) { return c.up.WriteTo(w) }

// Chunk passes a chunk of the streamed answer to onStream.
func (c *call) Chunk(p []byte) { c.onStream(c, p) }

// Close ends the relay: the upstream body is closed (its connection reused
// when fully read, else closed, which cancels the upstream call) and the call
// is released.
func (c *call) Close() error {
	c.up.Close()
	c.g.finish(c)
	c.release()
	return nil
}

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
