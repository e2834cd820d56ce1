package proxy

// clientReadBuffer is the size of the buffer fasthttp reads a client
// connection's requests with, and so the largest request head the gateway
// reads (request line and headers): a larger one is answered 431. The
// official SDKs send heads under 1 KiB. The buffer is held for as long as
// a request is served, a stream's whole life included: 4 KiB where 8 KiB
// were held is 4 KiB less per open stream.
const clientReadBuffer = 4 << 10
