package admin

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/keys"
	"github.com/modelgate/gateway/store"
)

// Prefix is the path of the keys' collection.
const Prefix = "/admin/v1/keys"

// freshFor is how recent the node's last read of the store must be for the API to answer
// from its snapshot: older, the store is taken as unreachable and the API answers 503.
const freshFor = 3 * time.Second

// Options configure New.
type Options struct {
	// Tokens returns the tokens in force, which authenticate the API; none turns it off
	// (404). nil means none.
	Tokens func() *Tokens
	// Store holds the keys made at runtime; nil answers every change 503.
	Store store.KeyStore
	// Keys is this node's syncer: the API reads its snapshot and refreshes it after a change.
	Keys *keys.Syncer
	// Models returns the configured model ids, for the check of patterns and limits.
	Models func() []string
	// Budgets returns the names of the configured budgets, which a key's budgets must be.
	Budgets func() []string
	// Logger receives the audit lines; nil means slog.Default.
	Logger *slog.Logger
	// Metrics receives the API's counters; nil means a set of its own.
	Metrics *metrics.Set
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// API serves /admin/v1/keys. Create it with New; safe for concurrent use.
type API struct {
	opts Options
	log  *slog.Logger
	set  *metrics.Set
}

// New returns the API of opts.
func New(opts Options) *API {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Tokens == nil {
		opts.Tokens = func() *Tokens { return nil }
	}
	if opts.Models == nil {
		opts.Models = func() []string { return nil }
	}
	if opts.Budgets == nil {
		opts.Budgets = func() []string { return nil }
	}
	return &API{opts: opts, log: opts.Logger, set: opts.Metrics}
}

// Enabled reports whether an admin token is configured.
func (a *API) Enabled() bool { return a.opts.Tokens().Len() > 0 }

// Owns reports whether path is the API's.
func Owns(path []byte) bool {
	p := string(path)
	return p == Prefix || strings.HasPrefix(p, Prefix+"/")
}

// apiError is an answer other than success: status, a machine-readable code, the message,
// and the field it is about.
type apiError struct {
	status  int
	code    string
	message string
	field   string
}

func errorOf(status int, code, message string) *apiError {
	return &apiError{status: status, code: code, message: message}
}

// Serve answers a request to a path Owns.
func (a *API) Serve(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if !a.Enabled() {
		a.fail(ctx, errorOf(404, "not_found", "the admin API is off: no admin token is configured (admin.tokens)"))
		return
	}
	admin, ok := a.opts.Tokens().Verify(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization))
	if !ok {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="admin"`)
		a.fail(ctx, errorOf(401, "unauthorized", "an admin token is required: Authorization: Bearer <token>"))
		return
	}
	if len(ctx.Request.Body()) > MaxBody || ctx.Request.Header.ContentLength() > MaxBody {
		a.fail(ctx, &apiError{status: 413, code: "too_large", field: "body", message: "the body is larger than 1 MiB"})
		return
	}
	id, action := route(ctx)
	if e := a.dispatch(ctx, admin, id, action); e != nil {
		a.refused(e)
		a.fail(ctx, e)
	}
}

// route splits the path into the key id and the action after it ("" for the key itself).
func route(ctx *fasthttp.RequestCtx) (id, action string) {
	rest := strings.TrimPrefix(string(ctx.Path()), Prefix)
	rest = strings.TrimPrefix(rest, "/")
	id, action, _ = strings.Cut(rest, "/")
	return id, action
}

func (a *API) dispatch(ctx *fasthttp.RequestCtx, admin, id, action string) *apiError {
	m := string(ctx.Method())
	switch {
	case id == "" && m == "POST":
		return a.create(ctx, admin)
	case id == "" && m == "GET":
		return a.list(ctx)
	case id == "":
		return methodNotAllowed(ctx, "GET, POST")
	case !store.ValidKeyID(id):
		return &apiError{status: 400, code: "invalid", field: "id",
			message: "a key id is 1 to 256 bytes of UTF-8 without spaces, control characters or any of { } / ? # %"}
	case action == "" && m == "GET":
		return a.get(ctx, id)
	case action == "" && m == "PATCH":
		return a.update(ctx, admin, id)
	case action == "" && m == "DELETE":
		return a.delete(ctx, admin, id)
	case action == "":
		return methodNotAllowed(ctx, "GET, PATCH, DELETE")
	case action != "block" && action != "unblock" && action != "rotate":
		return errorOf(404, "not_found", "unknown action "+strconv.Quote(action)+": block, unblock or rotate")
	case m != "POST":
		return methodNotAllowed(ctx, "POST")
	case action == "rotate":
		return a.rotate(ctx, admin, id)
	default:
		return a.setBlocked(ctx, admin, id, action == "block")
	}
}

func methodNotAllowed(ctx *fasthttp.RequestCtx, allow string) *apiError {
	ctx.Response.Header.Set("Allow", allow)
	return errorOf(405, "method_not_allowed", "method not allowed; allowed: "+allow)
}

// fresh answers 503 unless this node's snapshot is recent.
func (a *API) fresh() *apiError {
	if a.opts.Keys.Fresh(freshFor) {
		return nil
	}
	return unavailable()
}

func unavailable() *apiError {
	return errorOf(503, "store_unavailable", "the store of the keys is unreachable: no change can be made now; retry shortly")
}

func (a *API) create(ctx *fasthttp.RequestCtx, admin string) *apiError {
	now := a.opts.Now().UTC()
	c, err := parseKeyInput(ctx.Request.Body(), true, a.opts.Models(), a.opts.Budgets(), now)
	if err != nil {
		return invalid(err)
	}
	if c.id == "" {
		c.id = "key_" + randomHex(12)
	}
	if e := a.seedConflict(c.id); e != nil {
		return e
	}
	secret := "sk-mg-" + randomHex(24)
	r := &keys.Record{ID: c.id, Digest: keys.DigestOf(secret), CreatedAt: now, UpdatedAt: now}
	c.apply(r)
	if a.opts.Store == nil {
		return unavailable()
	}
	v, err := a.opts.Store.PutKey(r.ID, r.Encode(), nil)
	if errors.Is(err, store.ErrExists) {
		return &apiError{status: 409, code: "exists", field: "id", message: "a key with this id exists"}
	}
	if err != nil {
		return storeFailure(err)
	}
	a.changed(admin, "create", r.ID, v)
	writeJSON(ctx, 201, viewWithSecret(keys.EntryOf(r), secret))
	return nil
}

func (a *API) list(ctx *fasthttp.RequestCtx) *apiError {
	args := ctx.QueryArgs()
	limit := DefaultPageLimit
	if b := args.Peek("limit"); b != nil {
		n, err := strconv.Atoi(string(b))
		if err != nil || n < 1 || n > MaxPageLimit {
			return &apiError{status: 400, code: "invalid", field: "limit", message: "must be an integer from 1 to " + strconv.Itoa(MaxPageLimit)}
		}
		limit = n
	}
	prefix := string(args.Peek("name"))
	if e := a.fresh(); e != nil {
		return e
	}
	var match func(*keys.Entry) bool
	if prefix != "" {
		match = func(e *keys.Entry) bool { return strings.HasPrefix(nameOf(e), prefix) }
	}
	page, more := a.opts.Keys.Load().After(string(args.Peek("after")), limit, match)
	out := listView{Data: make([]keyView, 0, len(page)), HasMore: more}
	for _, e := range page {
		out.Data = append(out.Data, view(e))
	}
	if len(page) > 0 {
		out.LastID = page[len(page)-1].ID
	}
	writeJSON(ctx, 200, out)
	return nil
}

func (a *API) get(ctx *fasthttp.RequestCtx, id string) *apiError {
	if e := a.fresh(); e != nil {
		return e
	}
	e, ok := a.opts.Keys.Load().Get(id)
	if !ok {
		return notFound()
	}
	writeJSON(ctx, 200, view(e))
	return nil
}

func notFound() *apiError { return errorOf(404, "not_found", "no key has this id") }

func (a *API) update(ctx *fasthttp.RequestCtx, admin, id string) *apiError {
	c, err := parseKeyInput(ctx.Request.Body(), false, a.opts.Models(), a.opts.Budgets(), a.opts.Now())
	if err != nil {
		return invalid(err)
	}
	return a.change(ctx, admin, "update", id, func(r *keys.Record) { c.apply(r) })
}

func (a *API) setBlocked(ctx *fasthttp.RequestCtx, admin, id string, blocked bool) *apiError {
	if err := parseEmpty(ctx.Request.Body()); err != nil {
		return invalid(err)
	}
	action := "unblock"
	if blocked {
		action = "block"
	}
	return a.change(ctx, admin, action, id, func(r *keys.Record) { r.Blocked = blocked })
}

func (a *API) rotate(ctx *fasthttp.RequestCtx, admin, id string) *apiError {
	overlap, err := parseOverlap(ctx.Request.Body())
	if err != nil {
		return invalid(err)
	}
	secret := "sk-mg-" + randomHex(24)
	return a.changeAnd(ctx, admin, "rotate", id, secret, func(r *keys.Record) {
		now := a.opts.Now().UTC()
		prev := r.Previous[:0:0]
		for _, p := range r.Previous {
			if p.Until.After(now) {
				prev = append(prev, p)
			}
		}
		if overlap > 0 {
			prev = append(prev, keys.Previous{Digest: r.Digest, Until: now.Add(overlap)})
		}
		r.Previous, r.Digest = prev, keys.DigestOf(secret)
	})
}

func (a *API) delete(ctx *fasthttp.RequestCtx, admin, id string) *apiError {
	if e := a.writable(id); e != nil {
		return e
	}
	for range maxAttempts {
		data, e := a.stored(id)
		if e != nil {
			return e
		}
		v, err := a.opts.Store.DeleteKey(id, data)
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return storeFailure(err)
		}
		a.changed(admin, "delete", id, v)
		writeJSON(ctx, 200, map[string]any{"id": id, "deleted": true})
		return nil
	}
	return errorOf(409, "conflict", "the key kept changing meanwhile; retry")
}

// writable refuses a change of id that the API cannot make: a key of the config, or
// no store to keep it in.
func (a *API) writable(id string) *apiError {
	if e := a.seedConflict(id); e != nil {
		return e
	}
	if a.opts.Store == nil {
		return unavailable()
	}
	return nil
}

// stored reads the record of id as the store holds it, for a conditional write.
func (a *API) stored(id string) ([]byte, *apiError) {
	data, err := a.opts.Store.GetKey(id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, notFound()
	case err != nil:
		return nil, storeFailure(err)
	}
	return data, nil
}

// maxAttempts bounds the reads and conditional writes of one change that others race.
const maxAttempts = 8

func (a *API) change(ctx *fasthttp.RequestCtx, admin, action, id string, f func(*keys.Record)) *apiError {
	return a.changeAnd(ctx, admin, action, id, "", f)
}

// changeAnd applies f to the stored record of id and writes it back if no other change
// came between; the answer carries secret when it is not empty (a rotation).
func (a *API) changeAnd(ctx *fasthttp.RequestCtx, admin, action, id, secret string, f func(*keys.Record)) *apiError {
	if e := a.writable(id); e != nil {
		return e
	}
	for range maxAttempts {
		data, e := a.stored(id)
		if e != nil {
			return e
		}
		r, err := keys.Decode(id, data)
		if err != nil {
			return &apiError{status: 500, code: "internal", message: "the stored key is unreadable"}
		}
		f(r)
		r.UpdatedAt = a.opts.Now().UTC()
		v, err := a.opts.Store.PutKey(id, r.Encode(), data)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return storeFailure(err)
		}
		a.changed(admin, action, id, v)
		if secret != "" {
			writeJSON(ctx, 200, viewWithSecret(keys.EntryOf(r), secret))
		} else {
			writeJSON(ctx, 200, view(keys.EntryOf(r)))
		}
		return nil
	}
	return errorOf(409, "conflict", "the key kept changing meanwhile; retry")
}

// seedConflict refuses a change of a key of the config file.
func (a *API) seedConflict(id string) *apiError {
	for _, k := range a.opts.Keys.Seed() {
		if k.ID == id {
			return &apiError{status: 409, code: "config_key", field: "id",
				message: "the key " + strconv.Quote(id) + " comes from the config file: edit keys in the file and reload (SIGHUP) to change it"}
		}
	}
	return nil
}

// changed records a change: this node's snapshot brought up to it, an audit line and a
// metric.
func (a *API) changed(admin, action, id string, version uint64) {
	a.opts.Keys.Refresh()
	a.log.Info("admin: key changed", "admin", admin, "action", action, "key_id", id, "version", version)
	a.set.GetOrCreateCounter(`gateway_admin_key_changes_total{action="` + action + `"}`).Inc()
}

// refused counts a request the API refused.
func (a *API) refused(e *apiError) {
	a.set.GetOrCreateCounter(`gateway_admin_refused_total{status="` + strconv.Itoa(e.status) + `"}`).Inc()
}

func storeFailure(err error) *apiError {
	if errors.Is(err, store.ErrUnavailable) {
		return unavailable()
	}
	return errorOf(500, "internal", "the store failed")
}

func invalid(err error) *apiError {
	var fe *fieldError
	if errors.As(err, &fe) {
		return &apiError{status: 400, code: "invalid", field: fe.Field, message: fe.Message}
	}
	return &apiError{status: 400, code: "invalid", field: "body", message: err.Error()}
}

func (a *API) fail(ctx *fasthttp.RequestCtx, e *apiError) {
	if e.status == 503 {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	writeJSON(ctx, e.status, errorBody{Error: errorDetail{Code: e.code, Message: e.message, Field: e.field}})
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("BUG: an answer does not marshal: " + err.Error())
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(append(b, '\n'))
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
