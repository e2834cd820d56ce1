package proxy

// clientReadBuffer is the size of the buffer fasthttp reads a client
// connection's requests with, and so the largest request head the gateway
// reads (request line and headers): a larger one is answered 431.
//
// The buffer is held for as long as a request is served, a stream's whole
// life included, so a smaller one would be less held per open stream
// (4 KiB less at 4 KiB). But the interface lets an alpha file listing name
// up to 100 file ids in its query string: percent-encoded, 100 ids take
// 4.6 KiB before the SDK's headers (see TestHundredIDsListHeadFits).
const clientReadBuffer = 8 << 10
