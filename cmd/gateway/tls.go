package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/edgetls"
)

// edgeCerts reads the client listener's certificate, key and client CA when
// the config has a listen_tls; nil when it has none.
func edgeCerts(cfg *config.Config, log *slog.Logger) (*edgetls.Certs, error) {
	if cfg.ListenTLS == "" {
		return nil, nil
	}
	t := cfg.TLS
	o := edgetls.Options{
		CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFile: t.ClientCAFile,
		MinVersion: tls.VersionTLS12, HandshakeTimeout: t.HandshakeTimeout.D(), Curves: t.CurveIDs(), Log: log,
	}
	if t.MinVersion == "1.3" {
		o.MinVersion = tls.VersionTLS13
	}
	switch t.ClientAuth {
	case "request":
		o.ClientAuth = tls.VerifyClientCertIfGiven
	case "require":
		o.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return edgetls.New(o)
}

// listenTLS opens the client listener of listen_tls, speaking TLS with
// certs; nil when certs is.
func listenTLS(addr string, certs *edgetls.Certs) (net.Listener, error) {
	if certs == nil {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s (listen_tls): %w", addr, err)
	}
	return certs.Listener(ln), nil
}

// keepListeners keeps the listeners of the config in force in a reloaded
// cfg: like listen, listen_tls and tls take effect on restart. SIGHUP
// reloads the files tls names, not the names.
func keepListeners(cfg, old *config.Config, log *slog.Logger) {
	cfg.Listen = old.Listen
	if cfg.ListenTLS != old.ListenTLS || !reflect.DeepEqual(cfg.TLS, old.TLS) {
		log.Warn("reload: listen_tls or tls changed; like listen, they take effect on restart: SIGHUP reloads the files tls names")
	}
	cfg.ListenTLS, cfg.TLS = old.ListenTLS, old.TLS
}

// closeAll closes the listeners of lns that are not nil.
func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		if ln != nil {
			ln.Close()
		}
	}
}

// listenAttrs are the addresses of the client listeners for the log: addr
// is the plain one's, or listen_tls's when listen is off; addr_tls is
// listen_tls's.
func listenAttrs(plain, tln net.Listener) []any {
	var attrs []any
	if plain != nil {
		attrs = append(attrs, "addr", plain.Addr().String())
	}
	if tln != nil {
		if plain == nil {
			attrs = append(attrs, "addr", tln.Addr().String())
		}
		attrs = append(attrs, "addr_tls", tln.Addr().String())
	}
	return attrs
}

// certsMetrics writes the metrics of certs at each scrape; nil when certs is.
func certsMetrics(certs *edgetls.Certs) func(io.Writer) {
	if certs == nil {
		return nil
	}
	return certs.WritePrometheus
}
