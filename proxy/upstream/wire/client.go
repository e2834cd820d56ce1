package wire

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// Options are a deployment's client's: its timeouts (the zero value of each
// is none), its bound on connections, its TLS configuration (nil: plain
// TCP) and its Observer (nil: none).
type Options struct {
	// Connect bounds a dial, its TLS handshake included, and the wait for a
	// free connection; FirstByte, Idle and Write bound the reads and writes
	// (see dialer); IdleConn is how long a pooled connection may stay idle.
	Connect, FirstByte, Idle, Write, IdleConn time.Duration
	MaxConns                                  int
	TLS                                       *tls.Config
	Observer                                  Observer
	// Dial, when not nil, makes each connection in place of a TCP dial to
	// the address (an in-memory one, say): the wire still owns its
	// deadlines, its reads and its writes.
	Dial func(addr string) (net.Conn, error)
}

// NewClient makes a deployment's client to addr: fasthttp's HostClient, for
// its connection pool, with the wire's dialer and transport.
func NewClient(addr string, o Options) *fasthttp.HostClient {
	dial := &dialer{connect: o.Connect, firstByte: o.FirstByte, idle: o.Idle, write: o.Write, tls: o.TLS,
		obs: o.Observer, connectTo: o.Dial}
	return &fasthttp.HostClient{
		Addr:                          addr,
		Name:                          "",
		NoDefaultUserAgentHeader:      true,
		Dial:                          dial.Dial,
		Transport:                     answerTransport,
		MaxConns:                      o.MaxConns,
		MaxIdleConnDuration:           o.IdleConn,
		MaxIdemponentCallAttempts:     1,
		ReadBufferSize:                8 << 10,
		WriteBufferSize:               8 << 10,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		MaxResponseBodySize:           0, // the caller's to set
		MaxConnWaitTimeout:            o.Connect,
		// The connection released last is handed out first: a lull leaves the
		// rest idle, to be closed by MaxIdleConnDuration, and the one reused
		// is the least likely to have been closed by the upstream. FIFO, the
		// default, keeps every connection of a burst in use and shifts the
		// whole idle list on each acquire.
		ConnPoolStrategy:      fasthttp.LIFO,
		SecureErrorLogMessage: true, // errors never quote the answer's bytes
	}
}
