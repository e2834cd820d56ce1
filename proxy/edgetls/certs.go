package edgetls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelgate/gateway/proxy/promtext"
)

// Options name the files of the client listener's TLS and how it is spoken.
type Options struct {
	CertFile, KeyFile string // PEM certificate chain and its key; required
	// ClientCAFile holds the PEM roots that client certificates must chain
	// to; required unless ClientAuth is tls.NoClientCert.
	ClientCAFile string
	// ClientAuth is tls.NoClientCert, tls.VerifyClientCertIfGiven (a
	// certificate is asked for and checked when given) or
	// tls.RequireAndVerifyClientCert.
	ClientAuth tls.ClientAuthType
	MinVersion uint16 // tls.VersionTLS12 or tls.VersionTLS13; zero: 1.2
	// HandshakeTimeout bounds a client's handshake from its first byte; zero:
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Curves are the key exchanges accepted, in the server's order of
	// preference: a handshake takes the first the client supports (see
	// Certs.Config); nil: Go's defaults and order (post-quantum hybrids
	// first).
	Curves []tls.CurveID
	Log    *slog.Logger // nil: slog.Default()
	Now    func() time.Time
}

// DefaultHandshakeTimeout bounds a client's handshake unless Options say
// otherwise.
const DefaultHandshakeTimeout = 10 * time.Second

// ExpiryWarning is how close to its expiry a certificate draws a warning.
const ExpiryWarning = 14 * 24 * time.Hour

// Certs is the client listener's TLS: the certificate and client CA in force,
// swapped whole by Reload while handshakes go on. Safe for concurrent use;
// make it with New.
type Certs struct {
	o Options
	// base is the configuration the listener is made with: it hands each
	// handshake the one of cur, and owns the session ticket keys, which the
	// configurations of reloads share, so that a session resumes across them.
	base *tls.Config
	cur  atomic.Pointer[loaded]
}

// loaded is one reading of the files.
type loaded struct {
	conf *tls.Config
	// byCurve[i] is conf limited to the key exchange Options.Curves[i].
	byCurve  []*tls.Config
	leaf     *x509.Certificate
	notAfter time.Time
}

// New reads the files o names; an error names the field at fault.
func New(o Options) (*Certs, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.MinVersion == 0 {
		o.MinVersion = tls.VersionTLS12
	}
	c := &Certs{o: o}
	l, err := c.load()
	if err != nil {
		return nil, err
	}
	c.cur.Store(l)
	c.base = &tls.Config{
		MinVersion:         o.MinVersion,
		NextProtos:         []string{"http/1.1"},
		GetConfigForClient: c.configForClient,
	}
	c.warnExpiry(l)
	return c, nil
}

// load reads the certificate, key and client CA.
func (c *Certs) load() (*loaded, error) {
	if c.o.CertFile == "" || c.o.KeyFile == "" {
		return nil, errors.New("tls.cert_file, tls.key_file: both are required")
	}
	cert, err := tls.LoadX509KeyPair(c.o.CertFile, c.o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls.cert_file, tls.key_file: %w", err)
	}
	conf := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   c.o.MinVersion,
		NextProtos:   []string{"http/1.1"},
		ClientAuth:   c.o.ClientAuth,
		// Without a choice the handshake fails on no key exchange in common.
		CurvePreferences: c.o.Curves,
	}
	if c.o.ClientAuth != tls.NoClientCert {
		if conf.ClientCAs, err = readPool(c.o.ClientCAFile); err != nil {
			return nil, fmt.Errorf("tls.client_ca_file: %w", err)
		}
	}
	l := &loaded{conf: conf, leaf: cert.Leaf, notAfter: cert.Leaf.NotAfter}
	for _, id := range c.o.Curves {
		one := conf.Clone()
		one.CurvePreferences = []tls.CurveID{id}
		l.byCurve = append(l.byCurve, one)
	}
	return l, nil
}

func readPool(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, errors.New("required when client_auth is request or require")
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", path)
	}
	return pool, nil
}

func (c *Certs) configForClient(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	l := c.cur.Load()
	if len(l.byCurve) == 0 {
		return l.conf, nil
	}
	// Go's server takes CurvePreferences as a set and picks from it in its
	// own order (post-quantum hybrids first), so the operator's order is
	// kept by handing the handshake its first choice alone.
	tls13 := slices.Contains(hello.SupportedVersions, tls.VersionTLS13)
	for i, id := range c.o.Curves {
		if !tls13 && isTLS13Only(id) {
			continue
		}
		if slices.Contains(hello.SupportedCurves, id) {
			return l.byCurve[i], nil
		}
	}
	return l.conf, nil
}

// isTLS13Only reports whether the key exchange id is one that TLS 1.2
// cannot use: a post-quantum hybrid.
func isTLS13Only(id tls.CurveID) bool {
	switch id {
	case tls.X25519MLKEM768, tls.SecP256r1MLKEM768, tls.SecP384r1MLKEM1024:
		return true
	}
	return false
}

// Config returns the server configuration of the listener: each handshake
// takes the certificate and client CA in force when it starts, and the first
// key exchange of Options.Curves that the client supports (with TLS 1.2, the
// first that is not a post-quantum hybrid).
func (c *Certs) Config() *tls.Config { return c.base }

// Reload reads the files again and, when they make a valid pair (and client
// CA), puts them in force for the handshakes that follow; connections
// already open keep theirs. On an error the ones in force stay, and a log
// line says why.
func (c *Certs) Reload() error {
	l, err := c.load()
	if err != nil {
		c.o.Log.Error("tls reload refused: the certificate in force stays", "err", err)
		return err
	}
	c.cur.Store(l)
	c.o.Log.Info("tls certificate reloaded", "subject", l.leaf.Subject.String(), "serial", l.leaf.SerialNumber.String(),
		"not_after", l.notAfter.UTC().Format(time.RFC3339))
	c.warnExpiry(l)
	return nil
}

// Leaf returns the certificate in force.
func (c *Certs) Leaf() *x509.Certificate { return c.cur.Load().leaf }

// CheckExpiry logs a warning when the certificate in force expires within
// ExpiryWarning, and reports whether it does.
func (c *Certs) CheckExpiry() bool { return c.warnExpiry(c.cur.Load()) }

func (c *Certs) warnExpiry(l *loaded) bool {
	left := l.notAfter.Sub(c.o.Now())
	if left >= ExpiryWarning {
		return false
	}
	c.o.Log.Warn("tls certificate expires soon: replace the files and send SIGHUP",
		"subject", l.leaf.Subject.String(), "not_after", l.notAfter.UTC().Format(time.RFC3339),
		"left", left.Round(time.Minute).String())
	return true
}

// WatchExpiry checks the certificate's expiry every period (see CheckExpiry)
// until the returned stop is called.
func (c *Certs) WatchExpiry(every time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				c.CheckExpiry()
			}
		}
	}()
	return func() { close(done) }
}

// WritePrometheus writes the certificate's expiry time as a gauge.
func (c *Certs) WritePrometheus(w io.Writer) {
	b := promtext.AppendMetadata(nil, "gateway_tls_certificate_expiry_timestamp_seconds", "gauge",
		"Unix time at which the client listener's certificate in force expires; a warning is logged under 14 days before it")
	b = append(b, "gateway_tls_certificate_expiry_timestamp_seconds "...)
	b = strconv.AppendInt(b, c.cur.Load().notAfter.Unix(), 10)
	w.Write(append(b, '\n'))
}
