package proxy

import (
	"net"
	"time"

	"github.com/modelgate/gateway/proxy/clientconn"
	"github.com/modelgate/gateway/proxy/upstream"
)

// Listener wraps the client-facing listener ln (see clientconn.NewListener):
// a write to a client connection that makes no progress for
// timeouts.client_write_idle fails; an answer the provider finished
// meanwhile, and that fits limits.max_held_answer_bytes, lets its upstream
// connection go before that (see upstream.Stalls). Failed accepts count in
// gateway_accept_errors_total, connections refused to keep descriptors in
// gateway_client_connections_refused_total.
func (g *Gateway) Listener(ln net.Listener) net.Listener {
	return clientconn.NewListener(ln, clientconn.ListenerConfig{
		Errs: g.obs.acceptErrs[clientListenerLabel], Refused: g.obs.refused, Log: g.log,
		Busy:      g.upstreamBusy,
		WriteIdle: func() time.Duration { return g.state.Load().cfg.Timeouts.ClientWriteIdle.D() },
	})
}

// upstreamBusy returns the calls in flight to the deployments in force: the
// upstream connections they hold, at most.
func (g *Gateway) upstreamBusy() int64 {
	var n int64
	for _, d := range g.state.Load().deps {
		n += d.InFlight()
	}
	return n
}

// AdminListener wraps ln, the admin listener, so that a failed accept does
// not end its server (see clientconn.AdminListener).
func (g *Gateway) AdminListener(ln net.Listener) net.Listener {
	return clientconn.AdminListener(ln, g.obs.acceptErrs[adminListenerLabel], g.log)
}

// The listeners' labels in gateway_accept_errors_total.
const (
	clientListenerLabel = iota
	adminListenerLabel
	numListeners
)

var listenerNames = [numListeners]string{"client", "admin"}

// observeListeners makes the listeners' and the descriptors' metrics. The
// gauges are the process's: every gateway in it shows the same.
func (o *observer) observeListeners() {
	for i, name := range listenerNames {
		o.acceptErrs[i] = o.set.NewCounter(`gateway_accept_errors_total{listener="` + name + `"}`)
	}
	o.refused = o.set.NewCounter("gateway_client_connections_refused_total")
	o.set.NewGauge("gateway_client_connections", func() float64 { return float64(clientconn.OpenClients()) })
	o.set.NewGauge("gateway_upstream_connections", func() float64 { return float64(upstream.OpenConns()) })
}
