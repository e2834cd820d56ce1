package scenario

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/modelgate/gateway/bench/load"
)

// Models of the gateway config (see GatewayConfig); the simulator serves any model.
const (
	ModelChat   = "bench-chat"   // alpha and beta on the primary deployment
	ModelAffine = "bench-affine" // beta on every deployment: the affinity ring
	ModelImage  = "bench-image"  // an image model on the primary deployment
	ModelRouted = "bench-routed" // beta on the last two deployments: slow-deployment
)

// Sizes of the scenarios.
const (
	// Connections is the closed-loop concurrency of the throughput scenarios.
	Connections = 64
	// StreamEvents is the number of content deltas of a streamed answer.
	StreamEvents = 20
	// Sessions is the number of session ids of the affinity scenario.
	Sessions = 10000
	// ImageBytes is the size of the PNG of the image answer (base64 in JSON).
	ImageBytes = 4 << 20
	// UploadBytes is the size of the uploaded file, the spec's upper limit.
	UploadBytes = 8 << 20
	// RetrieveIDs is the number of responses a retrieve scenario reads in turn.
	RetrieveIDs = 256
	// idleOpenAllowance is the time the idle streams are given to open before
	// their hold: their second frame comes after it and the hold, not during.
	// (9,000 streams open in 1.5 to 9 s here, depending on the target.)
	idleOpenAllowance = 30 * time.Second
)

const (
	prompt        = `[{"role":"user","content":"Write one paragraph about lighthouses."}]`
	chatBody      = `{"model":"` + ModelChat + `","messages":` + prompt + `}`
	chatStream    = `{"model":"` + ModelChat + `","messages":` + prompt + `,"stream":true}`
	messagesBody  = `{"model":"` + ModelChat + `","max_tokens":1024,"messages":` + prompt + `,"stream":true}`
	responsesBody = `{"model":"` + ModelChat + `","input":"Write one paragraph about lighthouses."}`
	affineBody    = `{"model":"` + ModelAffine + `","messages":` + prompt + `}`
	routedBody    = `{"model":"` + ModelRouted + `","messages":` + prompt + `}`
	imageBody     = `{"model":"` + ModelImage + `","prompt":"A lighthouse at dusk, oil on canvas","size":"1024x1024"}`
)

var (
	chatRequest = request{fam: beta, gatewayPath: "/v1/router/beta/v1/chat/completions", simPath: "/v1/chat/completions"}
	eventsHdr   = load.Header{Name: "x-sim-events", Value: strconv.Itoa(StreamEvents)}
)

// All returns every scenario, sized by p; the idle-stream scenario comes last.
func All(p Params) []Scenario {
	p.EnsureDefaults()
	closed := func(conns int) load.Options {
		return load.Options{Connections: conns, Duration: p.Duration}
	}
	return []Scenario{
		chatPlain("chat", Connections, closed(Connections)),
		chatPlain("chat-1conn", 1, closed(1)),
		chatOpen(p),
		chatTLS("chat-tls", false, closed(Connections)),
		chatTLS("chat-tls-handshake", true, closed(Connections)),
		streamed("chat-stream", "Chat completion streamed", chatRequest, chatStream, closed(Connections)),
		streamed("messages-stream", "Alpha messages streamed",
			request{fam: alpha, gatewayPath: "/v1/router/alpha/v1/messages", simPath: "/v1/messages"},
			messagesBody, closed(Connections)),
		responsesCreate(closed(Connections)),
		responsesRetrieve(closed(Connections)),
		affinity(closed(Connections)),
		slowDeployment(p),
		imageAnswer(closed(8)),
		upload(p),
		filesUpload(p, "files-upload-1kib", 1<<10, 0),
		filesUpload(p, "files-upload-1mib", 1<<20, 4*p.Uploads),
		llmStreams(p),
		idle(p),
	}
}

func fixed(r request) func(context.Context, *Env, *Target) (*load.Spec, error) {
	return func(_ context.Context, env *Env, t *Target) (*load.Spec, error) {
		return r.spec(env, t), nil
	}
}

func chatPlain(name string, conns int, o load.Options) Scenario {
	r := chatRequest
	r.body = []byte(chatBody)
	return Scenario{
		Name: name,
		Description: fmt.Sprintf("Chat completion, not streamed (an answer of about 400 B), closed loop over %d %s.",
			conns, plural(conns, "connection")),
		Load:  o,
		build: fixed(r),
	}
}

// chatTLS is chat over the targets' TLS listeners, kept alive or with a new
// connection, so a full handshake, per call.
func chatTLS(name string, handshake bool, o load.Options) Scenario {
	r := chatRequest
	r.body = []byte(chatBody)
	how := "kept alive"
	if handshake {
		how = "a new connection and a full handshake per call (Connection: close, no session resumption, as Go's HTTP client by default)"
	}
	return Scenario{
		Name: name,
		Description: fmt.Sprintf("Chat completion, not streamed, over TLS (a self-signed ECDSA P-256 certificate, the client's "+
			"Go defaults: TLS 1.3), %s, closed loop over %d connections. The gateway's listen_tls and nginx's ssl listener present "+
			"the same certificate.", how, o.Connections),
		Load: o,
		TLS:  true,
		build: func(_ context.Context, env *Env, t *Target) (*load.Spec, error) {
			if t.TLSURL == "" {
				return nil, fmt.Errorf("%s has no TLS listener", t.Name)
			}
			tt := *t
			tt.URL = t.TLSURL
			s := r.spec(env, &tt)
			s.TLS, s.CloseEach = env.TLS, handshake
			return s, nil
		},
	}
}

func chatOpen(p Params) Scenario {
	r := chatRequest
	r.body = []byte(chatBody)
	return Scenario{
		Name: "chat-open",
		Description: fmt.Sprintf("Chat completion, not streamed, open loop at %.0f req/s (at most 256 in flight): "+
			"latency counts from each request's intended send time, so a stall is not hidden.", p.OpenRate),
		Load:  load.Options{Rate: p.OpenRate, Concurrency: 256, Duration: p.Duration},
		build: fixed(r),
	}
}

// streamed is a streamed answer of StreamEvents deltas; every target must
// relay exactly the events the simulator sends directly.
func streamed(name, what string, r request, body string, o load.Options) Scenario {
	r.body = []byte(body)
	r.headers = []load.Header{eventsHdr}
	r.check = load.Check{SSE: true}
	return Scenario{
		Name: name,
		Description: fmt.Sprintf("%s: %d content deltas (every event of the stream counted and checked), closed loop over %d connections.",
			what, StreamEvents, o.Connections),
		Load:  o,
		build: eventsSpec(&r),
	}
}

// directEvents returns the number of events the simulator sends for r.
func directEvents(ctx context.Context, env *Env, r *request) (int, error) {
	s := r.spec(env, &Target{Name: "direct", Kind: Direct, URL: env.Direct})
	n, err := countEvents(ctx, s)
	if err != nil {
		return 0, fmt.Errorf("cannot learn the event count from the simulator: %w", err)
	}
	return n, nil
}

// eventsSpec builds r's spec for a target, whose every answer must have as
// many events as the simulator sends for r.
func eventsSpec(r *request) func(context.Context, *Env, *Target) (*load.Spec, error) {
	return func(ctx context.Context, env *Env, t *Target) (*load.Spec, error) {
		n, err := directEvents(ctx, env, r)
		if err != nil {
			return nil, err
		}
		s := r.spec(env, t)
		s.Check.Events = n
		return s, nil
	}
}

func affinity(o load.Options) Scenario {
	r := chatRequest
	r.body = []byte(affineBody)
	return Scenario{
		Name: "affinity",
		Description: fmt.Sprintf("Chat completion, not streamed, each request with the next of %d x-session-id values; "+
			"the gateway spreads them over 4 simulator deployments by consistent hash, nginx spreads them over the same 4 "+
			"simulators with `hash $http_x_session_id consistent`, direct goes to the first. "+
			"Closed loop over %d connections.", Sessions, o.Connections),
		Load: o,
		build: func(_ context.Context, env *Env, t *Target) (*load.Spec, error) {
			if t.SessionURL != "" {
				st := *t
				st.URL = t.SessionURL
				t = &st
			}
			s := r.spec(env, t)
			s.Mutate = load.NewSessionPool(Sessions, "bench-session-").HeaderMutator("x-session-id")
			return s, nil
		},
	}
}

func imageAnswer(o load.Options) Scenario {
	r := request{fam: beta, gatewayPath: "/v1/router/beta/v1/images/generations", simPath: "/v1/images/generations",
		body:    []byte(imageBody),
		headers: []load.Header{{Name: "x-sim-image-bytes", Value: strconv.Itoa(ImageBytes)}},
	}
	return Scenario{
		Name: "image-4mib",
		Description: fmt.Sprintf("Image generation answering one %d MiB PNG as b64_json (a %.1f MiB JSON body), closed loop over %d connections.",
			ImageBytes>>20, float64(ImageBytes)*4/3/(1<<20), o.Connections),
		Load:  o,
		build: fixed(r),
	}
}

func upload(p Params) Scenario {
	body, contentType := uploadBody()
	r := request{fam: alpha, gatewayPath: "/v1/router/alpha/v1/files", simPath: "/v1/files",
		contentType: contentType, body: body, simStatus: 404}
	const conns = 4
	return Scenario{
		Name: "upload-8mib",
		Description: fmt.Sprintf("Alpha file upload: a multipart body with one %d MiB PNG, as the SDK sends it (no expiry field), "+
			"closed loop over %d connections, at most %d uploads a round. The gateway stores the file durably and answers 200; "+
			"the simulator has no files endpoint, so direct and nginx measure the same body carried to it, which reads it whole and answers 404.",
			UploadBytes>>20, conns, p.Uploads),
		Load:     load.Options{Connections: conns, Duration: p.Duration, MaxRequests: p.Uploads},
		Stateful: true,
		build:    fixed(r),
	}
}

// filesUpload is the upload of a file of size bytes, measured on the
// gateway's store engines only: the upload throughput of each, the Redis
// engine alone and with the bytes in object storage (store.blobs) among them.
// maxUploads, when not zero, bounds a round's uploads, which the stores keep.
func filesUpload(p Params, name string, size int, maxUploads uint64) Scenario {
	const conns = 16
	body, contentType := uploadBodyOf(size)
	r := request{fam: alpha, gatewayPath: "/v1/router/alpha/v1/files", simPath: "/v1/files",
		contentType: contentType, body: body}
	bound := ""
	if maxUploads > 0 {
		bound = fmt.Sprintf(", at most %d uploads a round", maxUploads)
	}
	return Scenario{
		Name: name,
		Description: fmt.Sprintf("File upload (POST /v1/files, a multipart body with one PNG of %s, as the SDK sends it), "+
			"closed loop over %d connections%s, on the gateway's store engines only: each answers 200 once the file is stored.",
			sizeText(size), conns, bound),
		Load:      load.Options{Connections: conns, Duration: p.Duration, MaxRequests: maxUploads},
		Stateful:  true,
		StoreOnly: true,
		build:     fixed(r),
	}
}

// sizeText is "1 KiB" or "1 MiB".
func sizeText(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// llmStreams is the edge's load: many long streams at once, each paced as a
// model answers, every frame stamped by the simulator.
func llmStreams(p Params) Scenario {
	r := chatRequest
	r.body = []byte(chatStream)
	r.headers = []load.Header{
		{Name: "x-sim-events", Value: strconv.Itoa(p.PacedEvents)},
		{Name: "x-sim-first-event", Value: p.PacedFirstEvent.String()},
		{Name: "x-sim-event-delay", Value: p.PacedEventDelay.String()},
		{Name: "x-sim-stamp", Value: "1"},
	}
	r.check = load.Check{SSE: true}
	return Scenario{
		Name: "llm-streams",
		Description: fmt.Sprintf("Paced chat streams, all open at once (%s): each sends its headers, its first frame after %v, "+
			"then %d content deltas of about 4 bytes and two more frames %v apart, every frame stamped with its send time. "+
			"Per target: RSS per open stream, CPU per relayed event, the delay each event gains from the simulator to the client, "+
			"the time to first event beyond the %v asked for, and failed streams.",
			sizesText(p.PacedStreams), p.PacedFirstEvent, p.PacedEvents, p.PacedEventDelay, p.PacedFirstEvent),
		Paced: &Paced{Sizes: p.PacedStreams, Options: load.PacedOptions{
			FirstEvent: p.PacedFirstEvent, EventDelay: p.PacedEventDelay}},
		build: eventsSpec(&r),
	}
}

// sizesText is "2,000, 10,000 and 20,000 streams".
func sizesText(sizes []int) string {
	var b []byte
	for i, n := range sizes {
		switch {
		case i == 0:
		case i == len(sizes)-1:
			b = append(b, " and "...)
		default:
			b = append(b, ", "...)
		}
		b = appendThousands(b, n)
	}
	return string(b) + " " + plural(sizes[len(sizes)-1], "stream")
}

// appendThousands appends n with a comma between groups of three digits.
func appendThousands(b []byte, n int) []byte {
	if n >= 1000 {
		b = appendThousands(b, n/1000)
		return fmt.Appendf(b, ",%03d", n%1000)
	}
	return strconv.AppendInt(b, int64(n), 10)
}

// idle holds streams that sent their first event and then nothing: the second
// frame is due only after the open allowance and the hold. A chat stream of
// one delta has three more frames, so it ends by itself four delays after it
// opened; a closed client is noticed at the next frame.
func idle(p Params) Scenario {
	delay := p.IdleHold + idleOpenAllowance
	r := chatRequest
	r.body = []byte(chatStream)
	r.headers = []load.Header{{Name: "x-sim-events", Value: "1"}, {Name: "x-sim-event-delay", Value: delay.String()}}
	r.check = load.Check{SSE: true}
	return Scenario{
		Name: "idle-sse",
		Description: fmt.Sprintf("%d streamed chat completions opened (each up to its first event) and held idle for %v; "+
			"memory per stream is the target's RSS growth over the streams held. "+
			"%d, not 10,000: a proxy holds two descriptors per stream and the open-files hard limit here is 20,000.",
			p.IdleStreams, p.IdleHold, p.IdleStreams),
		Idle:   &load.IdleOptions{Streams: p.IdleStreams, Hold: p.IdleHold},
		Linger: 4*delay + 5*time.Second,
		build:  fixed(r),
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
