package proxy

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/accesslog"
	"github.com/modelgate/gateway/proxy/admin"
	"github.com/modelgate/gateway/proxy/clientconn"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/keys"
	"github.com/modelgate/gateway/proxy/ratelimit"
	"github.com/modelgate/gateway/proxy/upstream"
	"github.com/modelgate/gateway/store"
)

// Options are the gateway's process-level knobs; the zero value is usable.
type Options struct {
	// Store holds Responses ownership records and user-data files. Required
	// by those endpoints; nil disables them (they answer 503).
	Store store.Store
	// Keys stores the callers' keys that the admin API manages, followed by
	// every gateway on the store; nil serves the config's keys alone.
	// cmd/gateway passes its store's engine.
	Keys store.KeyStore
	// Limits says where the keys' rate limits keep their buckets, and the
	// budgets their ledger: the zero value in memory, per gateway;
	// cmd/gateway names the Redis store's cluster (Redis, KeyPrefix), shared
	// by every gateway on it. A nil Now is the gateway's.
	Limits ratelimit.Options
	// Verifier replaces the callers' keys (the config's and the store's) as the
	// identity component.
	Verifier Verifier
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// AccessLog receives one line per request when it ends; nil turns the
	// access log off. accesslog.New writes slog's text or JSON lines without
	// slog; accesslog.FromSlog hands them to a *slog.Logger, whose handler
	// must not keep attribute values past Handle.
	AccessLog *accesslog.Log
	// Version is the build's version, shown on the status page.
	Version string
	// NoTokenUsage turns off reading the token usage of answers (counted in
	// gateway_tokens_total and the access log).
	NoTokenUsage bool
	// Metrics, when not nil, writes more metrics at each scrape of /metrics,
	// each with its # HELP and # TYPE lines (the client listener's TLS
	// certificate's expiry).
	Metrics func(w io.Writer)
}

// Gateway serves the client-facing endpoints. Safe for concurrent use; Reload
// swaps the config atomically while requests are served.
type Gateway struct {
	state  atomic.Pointer[state]
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	router *router.Router
	obs    *observer
	limits *ratelimit.Limiter
	spend  spending // money budgets; see spend.go
	// bodiesHeld is the request body bytes reserved by calls in flight; see
	// reserveBody.
	bodiesHeld atomic.Int64
	// keys keeps the callers' keys in force; admin serves their API, with
	// adminTokens; see callerkeys.go.
	keys        *keys.Syncer
	admin       *admin.API
	adminTokens atomic.Pointer[admin.Tokens]
	// streams are the client connections whose streams are written outside
	// the server; see hijack.go.
	streams streamConns
}

// New builds a gateway for cfg, which must have passed Validate.
func New(cfg *config.Config, opts Options) (*Gateway, error) {
	g := &Gateway{opts: opts, log: opts.Logger, now: opts.Now}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.now == nil {
		g.now = time.Now
	}
	g.limits = newLimiter(opts.Limits, g.now)
	g.observe()
	g.setupSpend(opts.Limits)
	g.setupKeys(opts.Keys)
	if err := g.Reload(cfg); err != nil {
		return nil, err
	}
	g.router = g.routes()
	return g, nil
}

// Reload swaps in cfg. Requests in flight finish on the config they started
// with; unchanged deployments keep their connections and health.
func (g *Gateway) Reload(cfg *config.Config) error {
	prev := g.state.Load()
	st, err := buildState(cfg, g.opts.Verifier, prev, g.now())
	if err != nil {
		return err
	}
	if st.tracer, err = g.tracerFor(cfg, g.state.Load()); err != nil {
		return err
	}
	for _, d := range st.deps {
		d.SetLogger(g.log)
	}
	g.state.Store(st)
	g.adminTokens.Store(admin.NewTokens(cfg.Admin.Tokens))
	g.updateSpend(cfg)
	g.keys.SetSeed(cfg.Keys) // and the keys' limits, through keysSwapped
	for _, d := range st.deps {
		d.StartProbes()
	}
	if prev != nil {
		for name, d := range prev.deps {
			if st.deps[name] != d {
				d.StopProbes() // replaced or removed: its probes end with it
			}
		}
	}
	return nil
}

// Close stops the gateway's background work, the deployments' health probes,
// and sends the budgets' queued settlements; calls under way are not affected. Reload must not be called after.
func (g *Gateway) Close() {
	for _, d := range g.state.Load().deps {
		d.StopProbes()
	}
	g.spend.ledger.Flush() // the budgets' settlements not yet sent: spend.go
}

// newLimiter keeps the keys' rate limits where opts says, on the gateway's
// clock unless opts has its own.
func newLimiter(opts ratelimit.Options, now func() time.Time) *ratelimit.Limiter {
	if opts.Now == nil {
		opts.Now = now
	}
	return ratelimit.New(opts)
}

// Config returns the config in force.
func (g *Gateway) Config() *config.Config { return g.state.Load().cfg }

// Handler returns the request handler.
func (g *Gateway) Handler() fasthttp.RequestHandler { return g.serve }

// serve answers a request (route) and holds a whole answer back for the
// connection's next read (holdAnswer).
func (g *Gateway) serve(ctx *fasthttp.RequestCtx) {
	g.route(ctx)
	holdAnswer(ctx)
}

// route matches the Responses routes named by a response id before the
// router, which makes a string and two interface values of a path
// parameter: three allocations on every retrieve. Everything else, and any
// path these do not match exactly, is the router's.
func (g *Gateway) route(ctx *fasthttp.RequestCtx) {
	if e := headFault(&ctx.Request.Header); e != nil {
		g.refuseHead(ctx, e)
		return
	}
	if closeRequested(&ctx.Request.Header) {
		ctx.SetConnectionClose()
	}
	if id, ep, ok := responsesIDRoute(ctx); ok {
		defer g.recoverPanic(ctx)
		g.responsesOwned(ctx, ep, id)
		return
	}
	g.router.Handler(ctx)
}

// holdAnswer has the client's connection hold back a whole answer, which
// fasthttp writes after the handler, until the server reads for the next
// request: the answer is then written inside that read's wait, which saves
// the read that would find nothing (see clientconn.Conn.Read). A streamed
// answer is not held: its bytes go as they come, and its relay holds its end
// itself (upstream.Relay's tail); nor is one a hijacked connection writes.
//
// An answer whose head the connection completes (see
// clientconn.Conn.ArmSplice) is armed for it here, or given its headers back
// when it is not held; a stream's first bytes are then held until its head
// is complete, and sent at once.
func holdAnswer(ctx *fasthttp.RequestCtx) {
	cc, ok := ctx.Conn().(*clientconn.Conn)
	if !ok {
		return
	}
	switch {
	case ctx.Hijacked():
		cc.ArmSplice(&ctx.Response, clientconn.HeldNot)
	case ctx.Response.IsBodyStream():
		cc.ArmSplice(&ctx.Response, clientconn.HeldHead)
	default:
		cc.HoldTail()
		cc.ArmSplice(&ctx.Response, clientconn.HeldWhole)
	}
}

// closeRequested reports whether the client's Connection header lists close
// among other options, as in "close, te": the connection must then close
// after the answer (RFC 9112 section 9.6), which fasthttp does only for a
// header that is "close" and nothing else.
func closeRequested(h *fasthttp.RequestHeader) bool {
	v := h.Peek(fasthttp.HeaderConnection)
	return len(v) > len("close") && upstream.NamedIn(v, []byte("close"))
}

// recoverPanic answers a panicking handler as the router's PanicHandler does.
func (g *Gateway) recoverPanic(ctx *fasthttp.RequestCtx) {
	if v := recover(); v != nil {
		g.panicked(ctx, v)
	}
}

// framedTwice reports whether a chunked request also has a Content-Length.
// fasthttp reads its body as chunked and drops the length, but a proxy in
// front of the gateway may have framed it by the length: the bytes one reads
// as the next request are the other's body (request smuggling). Only a
// chunked request's raw head is looked at.
func framedTwice(h *fasthttp.RequestHeader) bool {
	if h.ContentLength() != -1 {
		return false
	}
	for raw := h.RawHeaders(); len(raw) > 0; {
		var line []byte
		line, raw, _ = bytes.Cut(raw, []byte("\n"))
		name, _, ok := bytes.Cut(line, []byte(":"))
		if ok && bytes.EqualFold(bytes.TrimRight(name, " \t"), []byte("Content-Length")) {
			return true
		}
	}
	return false
}

// The answers to heads fasthttp read but the gateway refuses (see headFault).
var (
	errFramedTwice = &Error{Status: 400, Reason: "framed_twice",
		Message: "the request has both Content-Length and Transfer-Encoding"}
	headEndError = Error{Status: 400, Reason: "malformed_request",
		Message: "the request head must end with CRLF CRLF"}
)

// headFault returns why a head fasthttp read is refused, or nil: a chunked
// request with a Content-Length too (framedTwice), a head that ends without
// CRLF CRLF (clientconn.HeadEndsBadly), a request line of another version than HTTP/1.1
// or HTTP/1.0, which fasthttp reads as "HTTP/d.d" and serves as 1.0 (505,
// RFC 9110 section 15.6.6).
func headFault(h *fasthttp.RequestHeader) *Error {
	switch proto := h.Protocol(); {
	case framedTwice(h):
		return errFramedTwice
	case clientconn.HeadEndsBadly(h.RawHeaders()):
		return &headEndError
	case string(proto) != "HTTP/1.1" && string(proto) != "HTTP/1.0":
		return &Error{Status: 505, Reason: "http_version",
			Message: "HTTP version " + string(proto) + " is not supported: send HTTP/1.1"}
	}
	return nil
}

// refuseHead answers a request whose head is refused with e, and closes the
// connection without reading the body, as RFC 9112 section 6.1 requires of
// one framed twice: what follows the head cannot be trusted to be its body.
func (g *Gateway) refuseHead(ctx *fasthttp.RequestCtx, e *Error) {
	c := g.acquireCall(ctx, familyOfPath(ctx.Request.Header.RequestURI()), epOther)
	defer c.end()
	c.fail(e)
	c.bodyDone = true // the body is not read: the connection closes
	clientconn.CloseAfterAnswer(ctx)
}

// requestError is the server's ErrorHandler: it answers a request fasthttp
// could not read (a malformed head, a head larger than the read buffer, a
// read timeout) in the error shape of the family its path names, as far as
// the request line was read; fasthttp then closes the connection.
func (g *Gateway) requestError(ctx *fasthttp.RequestCtx, err error) {
	e := &Error{Status: 400, Reason: "malformed_request", Message: "the request is not valid HTTP/1.1"}
	var small *fasthttp.ErrSmallBuffer
	var nerr net.Error
	switch {
	case errors.As(err, &small):
		e = &Error{Status: 431, Reason: "header_too_large", Message: "the request's header is larger than the gateway reads"}
	case errors.As(err, &nerr) && nerr.Timeout():
		e = &Error{Status: 408, Reason: "request_timeout", Message: "the request did not arrive in time"}
	case errors.Is(err, clientconn.ErrHeadEnd):
		e = &headEndError
	}
	// fasthttp has reset the header it could not read: the family comes from
	// the request line as the connection received it.
	var head []byte
	if cc, ok := ctx.Conn().(*clientconn.Conn); ok {
		head = cc.RequestHead()
	}
	c := g.acquireCall(ctx, familyOfRequestLine(head), epOther)
	defer c.end()
	c.fail(e)
}

// familyOfRequestLine is the family of the path in the request line at the
// start of head: beta when there is none.
func familyOfRequestLine(head []byte) family.Family {
	_, rest, _ := bytes.Cut(head, []byte(" "))
	return familyOfPath(rest)
}

// NewServer returns a fasthttp server for the gateway: request bodies are
// streamed so that per-route limits apply before a body is held, and there is
// no write timeout, which would cut long streams.
func (g *Gateway) NewServer() *fasthttp.Server {
	s := &fasthttp.Server{
		Handler:                      g.Handler(),
		ErrorHandler:                 g.requestError,
		Name:                         "modelgate",
		ReadTimeout:                  2 * time.Minute,
		IdleTimeout:                  2 * time.Minute,
		MaxRequestBodySize:           1 << 20,
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		ReadBufferSize:               clientReadBuffer,
		CloseOnShutdown:              true,
		TCPKeepalive:                 true,
		NoDefaultContentType:         true,
		SecureErrorLogMessage:        true, // and slogPrinter drops the texts anyway
		Logger:                       slogPrinter{g.log},
	}
	g.streams.serveWith(s)
	return s
}

func (g *Gateway) routes() *router.Router {
	r := router.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.NotFound = g.notFound
	r.MethodNotAllowed = g.methodNotAllowed
	r.PanicHandler = g.panicked

	g.routeModels(r)
	r.POST("/v1/router/beta/v1/chat/completions", g.chat)
	for _, base := range alphaBases {
		r.POST(base+"/v1/messages", g.messages)
	}
	g.routeResponses(r)
	g.routeImages(r)
	g.routeFiles(r)
	g.routeOps(r)
	return r
}

// alphaBases are the bases an alpha SDK may be pointed at.
var alphaBases = []string{"/v1/router/alpha", "/alpha", "/alpha/{group}"}

func (g *Gateway) messages(ctx *fasthttp.RequestCtx) {
	g.modelCall(ctx, family.Alpha, epMessages, "/v1/messages")
}

func (g *Gateway) chat(ctx *fasthttp.RequestCtx) {
	g.modelCall(ctx, family.Beta, epChat, "/chat/completions")
}

// familyOfPath tells which family's error shape a path expects.
func familyOfPath(p []byte) family.Family {
	switch {
	case bytes.HasPrefix(p, []byte("/v1/router/alpha")) || bytes.HasPrefix(p, []byte("/alpha")):
		return family.Alpha
	case bytes.HasPrefix(p, []byte("/v1/router/gamma")) || bytes.HasPrefix(p, []byte("/gamma")):
		return family.Gamma
	}
	return family.Beta
}

// notFound answers a path no route serves. A path that an SDK calls gets the
// base URL to use, in the shape of that SDK's family.
func (g *Gateway) notFound(ctx *fasthttp.RequestCtx) {
	fam, msg, ok := baseURLHint(ctx)
	if !ok {
		msg = "unknown path " + string(ctx.Path())
	}
	c := g.acquireCall(ctx, fam, epOther)
	defer c.end()
	c.fail(&Error{Status: 404, Reason: "unknown_path", Message: msg})
}

func (g *Gateway) methodNotAllowed(ctx *fasthttp.RequestCtx) {
	c := g.acquireCall(ctx, familyOfPath(ctx.Path()), epOther)
	defer c.end()
	c.fail(&Error{Status: 405, Reason: "method_not_allowed",
		Message: "method " + string(ctx.Method()) + " is not allowed on " + string(ctx.Path())})
}

func (g *Gateway) panicked(ctx *fasthttp.RequestCtx, v any) {
	g.log.Error("BUG: handler panicked", "panic", panicSummary(v), "family", familyOfPath(ctx.Path()).String())
	writeError(ctx, familyOfPath(ctx.Path()), &Error{Status: 500, Message: "internal error"}, nil)
}
