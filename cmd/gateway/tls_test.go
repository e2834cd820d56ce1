package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/modelgate/gateway/proxy/edgetls/testca"
)

// tlsEnv is env with listen_tls on a loopback port, its certificate files
// at certFile and keyFile.
type tlsEnv struct {
	*env
	ca                *testca.CA
	certFile, keyFile string
}

func newTLSEnv(t *testing.T, first *testca.Leaf, ca *testca.CA, extraTLS string, extraKeys ...string) *tlsEnv {
	t.Helper()
	e := &tlsEnv{env: newEnv(t), ca: ca}
	e.writeConfig("", extraKeys...)
	e.certFile, e.keyFile = filepath.Join(e.dir, "edge.pem"), filepath.Join(e.dir, "edge-key.pem")
	first.Install(t, e.certFile, e.keyFile)
	appendFile(t, e.cfgPath, fmt.Sprintf("listen_tls: 127.0.0.1:0\ntls: {cert_file: %q, key_file: %q%s}\n", e.certFile, e.keyFile, extraTLS))
	return e
}

// tlsBase returns the https base of g's listen_tls.
func tlsBase(t *testing.T, g *gateway) string {
	t.Helper()
	return "https://" + logField(t, g.stderr.waitFor(t, `"gateway listening"`), "addr_tls")
}

// tlsClient is an HTTP client that trusts roots; keepAlive false makes a
// handshake per call.
func tlsClient(roots *x509.CertPool, keepAlive bool, certs ...tls.Certificate) *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, Certificates: certs},
		DisableKeepAlives:   !keepAlive,
		MaxIdleConnsPerHost: 64,
	}}
}

func sdkOverTLS(base string, hc *http.Client) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/router/beta/v1"), option.WithAPIKey(keyA),
		option.WithHTTPClient(hc), option.WithMaxRetries(0))
}

var tlsChat = openai.ChatCompletionNewParams{
	Model:    "old-model",
	Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
}

// chatOverTLS makes one chat call, streamed or not, and checks its answer.
func chatOverTLS(c openai.Client, streamed bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !streamed {
		cc, err := c.Chat.Completions.New(ctx, tlsChat)
		if err != nil {
			return err
		}
		if len(cc.Choices) != 1 || cc.Choices[0].Message.Content == "" {
			return fmt.Errorf("an empty answer: %+v", cc)
		}
		return nil
	}
	stream := c.Chat.Completions.NewStreaming(ctx, tlsChat)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return err
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Choices[0].FinishReason != "stop" {
		return fmt.Errorf("a stream without its end: %+v", acc.Choices)
	}
	return nil
}

// servedSerial makes a new handshake with base's listener and returns the
// serial of the certificate it presents.
func servedSerial(t *testing.T, base string, roots *x509.CertPool) string {
	t.Helper()
	c, err := tls.Dial("tcp", strings.TrimPrefix(base, "https://"), &tls.Config{RootCAs: roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// The official SDKs call chat and messages, plain and streamed, over TLS
// with the test root, beside the plain listener; ALPN says http/1.1; a certificate that
// expires within 14 days is a warning and its expiry a metric.
func TestTLSListenerSDK(t *testing.T) {
	ca := testca.New(t, "edge")
	leaf := ca.Server(t, 10*24*time.Hour)
	e := newTLSEnv(t, leaf, ca, "")
	g := e.start()
	base := tlsBase(t, g)
	c := sdkOverTLS(base, tlsClient(ca.Pool(), true))
	for _, streamed := range []bool{false, true} {
		if err := chatOverTLS(c, streamed); err != nil {
			t.Fatalf("streamed %v: %v", streamed, err)
		}
	}
	ac := anthropic.NewClient(aoption.WithBaseURL(base+"/v1/router/alpha"), aoption.WithAuthToken(keyA),
		aoption.WithAPIKey(""), aoption.WithMaxRetries(0), aoption.WithHTTPClient(tlsClient(ca.Pool(), true)))
	msg := anthropic.MessageNewParams{Model: "old-model", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}
	if m, err := ac.Messages.New(context.Background(), msg); err != nil || len(m.Content) == 0 {
		t.Fatalf("alpha messages over TLS: %v", err)
	}
	stream := ac.Messages.NewStreaming(context.Background(), msg)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil || acc.StopReason == "" {
		t.Fatalf("alpha stream over TLS: %v, stop reason %q", err, acc.StopReason)
	}
	if status, _, _ := do(t, "GET", g.base+"/healthz", "", nil, ""); status != 200 {
		t.Fatalf("the plain listener: /healthz %d", status)
	}
	tc, err := tls.Dial("tcp", strings.TrimPrefix(base, "https://"), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("ALPN %q, want http/1.1", p)
	}
	tc.Close()
	g.stderr.waitFor(t, "tls certificate expires soon")
	_, _, metrics := do(t, "GET", g.admin+"/metrics", "", nil, "")
	want := fmt.Sprintf("gateway_tls_certificate_expiry_timestamp_seconds %d\n", leaf.Cert.NotAfter.Unix())
	if !strings.Contains(metrics, want) || !strings.Contains(metrics, "# HELP gateway_tls_certificate_expiry_timestamp_seconds ") {
		t.Fatalf("no %q with its help in /metrics", want)
	}
}

// The certificate is replaced and reloaded (SIGHUP) while 64 clients call
// and stream, half of them with a handshake per call: no call fails, and
// the handshakes that follow present the new certificate. A broken pair
// then is refused, and the new certificate stays.
func TestTLSReloadUnderLoad(t *testing.T) {
	ca := testca.New(t, "edge")
	first, second := ca.Server(t, 90*24*time.Hour), ca.Server(t, 90*24*time.Hour)
	e := newTLSEnv(t, first, ca, "")
	g := e.start()
	base := tlsBase(t, g)
	if got := servedSerial(t, base, ca.Pool()); got != first.Cert.SerialNumber.String() {
		t.Fatalf("serial %s, want %s", got, first.Cert.SerialNumber)
	}
	const clients = 64
	var (
		reloaded         atomic.Bool
		calls, failed    atomic.Int64
		afterReload      sync.WaitGroup
		stop             = make(chan struct{})
		wg               sync.WaitGroup
		firstErr         atomic.Value
		keepAlive, fresh = tlsClient(ca.Pool(), true), tlsClient(ca.Pool(), false)
	)
	afterReload.Add(clients)
	for i := range clients {
		hc := keepAlive
		if i%2 == 1 {
			hc = fresh
		}
		c := sdkOverTLS(base, hc)
		wg.Go(func() {
			counted := false
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				wasReloaded := reloaded.Load()
				if err := chatOverTLS(c, n%2 == 0); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				calls.Add(1)
				if wasReloaded && !counted {
					counted = true
					afterReload.Done() // a whole call began after the reload
				}
			}
		})
	}
	for calls.Load() < clients {
		time.Sleep(5 * time.Millisecond) // every client under way before the swap
	}
	second.Install(t, e.certFile, e.keyFile)
	g.signal(syscall.SIGHUP)
	g.stderr.waitFor(t, "tls certificate reloaded")
	reloaded.Store(true)
	afterReload.Wait()
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d calls failed across the reload; the first: %v", n, calls.Load(), firstErr.Load())
	}
	if got := servedSerial(t, base, ca.Pool()); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after the reload a handshake presents serial %s, want %s", got, second.Cert.SerialNumber)
	}
	t.Logf("%d calls across the reload, none failed", calls.Load())

	if err := os.WriteFile(e.keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.signal(syscall.SIGHUP)
	g.stderr.waitFor(t, "tls reload refused")
	if got := servedSerial(t, base, ca.Pool()); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after a refused reload a handshake presents serial %s, want %s", got, second.Cert.SerialNumber)
	}
	if err := chatOverTLS(sdkOverTLS(base, tlsClient(ca.Pool(), false)), true); err != nil {
		t.Fatalf("a call after a refused reload: %v", err)
	}
}

// listen: off serves listen_tls alone; client_auth require refuses a client
// without a certificate and serves one with a certificate of the client CA.
func TestTLSListenOffClientAuth(t *testing.T) {
	ca, clients := testca.New(t, "edge"), testca.New(t, "clients")
	e := newTLSEnv(t, ca.Server(t, 90*24*time.Hour), ca, fmt.Sprintf(", client_auth: require, client_ca_file: %q", clients.CertFile))
	g := launch(t, "", []string{"-config", e.cfgPath, "-listen", "off", "-log-format", "json", "-admin-listen", "off"}, e.hold.Release)
	base := "https://" + logField(t, g.stderr.waitFor(t, `"gateway listening"`), "addr")
	if !strings.HasSuffix(tlsBase(t, g), strings.TrimPrefix(base, "https://")) {
		t.Fatalf("with listen off, addr %s is not listen_tls's", base)
	}
	if err := chatOverTLS(sdkOverTLS(base, tlsClient(ca.Pool(), true)), false); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if err := chatOverTLS(sdkOverTLS(base, tlsClient(ca.Pool(), true, clients.Client(t, "svc").TLS)), true); err != nil {
		t.Fatalf("a client with a certificate of the client CA: %v", err)
	}
}

// With client_auth require, a client certificate that a key's client_cert
// names stands for that key when the call carries none: by common name or
// by public key. The call is that key's (the access log's key_id); a
// certificate no key names is answered 401 in the family's shape; a key
// sent beside a certificate wins.
func TestTLSClientCertStandsForKey(t *testing.T) {
	ca, clients := testca.New(t, "edge"), testca.New(t, "clients")
	byCN, byKey, nobody := clients.Client(t, "svc-a"), clients.Client(t, "renamed-b"), clients.Client(t, "nobody")
	spki := sha256.Sum256(byKey.Cert.RawSubjectPublicKeyInfo)
	e := newTLSEnv(t, ca.Server(t, 90*24*time.Hour), ca, fmt.Sprintf(", client_auth: require, client_ca_file: %q", clients.CertFile),
		"  - {id: svc-a, client_cert: {subject_cn: svc-a}}\n",
		"  - {id: svc-b, client_cert: {spki_sha256: "+strings.ToUpper(hex.EncodeToString(spki[:]))+"}}\n")
	g := e.start()
	base := tlsBase(t, g)
	call := func(leaf *testca.Leaf, path, key, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := tlsClient(ca.Pool(), false, leaf.TLS).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const chat = `{"model":"old-model","messages":[{"role":"user","content":"hi"}]}`
	const messages = `{"model":"old-model","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	f := func(leaf *testca.Leaf, path, key, body, wantKey string) {
		t.Helper()
		status, out := call(leaf, path, key, body)
		if status != 200 {
			t.Fatalf("%s as %s: %d %s", path, leaf.Cert.Subject.CommonName, status, out)
		}
		g.stdout.waitFor(t, `"key_id":"`+wantKey+`"`)
	}
	f(byCN, "/v1/router/beta/v1/chat/completions", "", chat, "svc-a")
	f(byKey, "/v1/router/alpha/v1/messages", "", messages, "svc-b")
	f(byCN, "/v1/router/alpha/v1/messages", keyA, messages, "team-a")
	status, out := call(nobody, "/v1/router/beta/v1/chat/completions", "", chat)
	if status != 401 || !strings.Contains(out, `"error":{"message":"missing API key`) {
		t.Fatalf("a certificate no key names: %d %s", status, out)
	}
	if status, out := call(nobody, "/v1/router/alpha/v1/messages", "", messages); status != 401 || !strings.Contains(out, `"type":"authentication_error"`) {
		t.Fatalf("a certificate no key names, alpha: %d %s", status, out)
	}
}

// tls.curves reaches the listener in its order, and stays in force across a
// SIGHUP: the certificate reload keeps it, and a changed list, like the rest
// of tls, waits for a restart.
func TestTLSCurvesAcrossReload(t *testing.T) {
	ca := testca.New(t, "edge")
	e := newTLSEnv(t, ca.Server(t, 90*24*time.Hour), ca, ", curves: [x25519, X25519MLKEM768]")
	g := e.start()
	addr := strings.TrimPrefix(tlsBase(t, g), "https://")
	agreed := func() tls.CurveID {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().CurveID
	}
	if id := agreed(); id != tls.X25519 {
		t.Fatalf("curves [x25519, X25519MLKEM768]: Go's client agreed on %v, want X25519", id)
	}
	b, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(e.cfgPath, []byte(strings.Replace(string(b), "curves: [x25519, X25519MLKEM768]", "curves: [X25519MLKEM768, x25519]", 1)), 0o600)
	g.signal(syscall.SIGHUP)
	g.stderr.waitFor(t, "listen_tls or tls changed")
	g.stderr.waitFor(t, "tls certificate reloaded")
	if id := agreed(); id != tls.X25519 {
		t.Fatalf("after SIGHUP: %v, want X25519 still", id)
	}
}
