package proxy

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/modelgate/gateway/proxy/latency"
	"github.com/modelgate/gateway/proxy/promtext"
	"github.com/modelgate/gateway/store"
)

// storeOp names a store operation in metrics.
type storeOp uint8

const (
	opPutResponse storeOp = iota
	opGetResponse
	opDeleteResponse
	opReclaimResponses
	opPutFile
	opGetFile
	opAppendFileData
	opDeleteFile
	opListFiles
	opReclaimExpired
	numStoreOps
)

var storeOpNames = [numStoreOps]string{
	"put_response", "get_response", "delete_response", "reclaim_responses",
	"put_file", "get_file", "append_file_data", "delete_file", "list_files", "reclaim_expired",
}

// opMetrics counts one store operation by result and times it.
type opMetrics struct {
	ok, notFound, refused, unavailable, failed *metrics.Counter
	duration                                   *latency.Histogram
}

// observedStore is a store.Store that counts and times every operation of the
// store it wraps, by result: ok, not_found, refused (ErrInvalid, ErrTooLarge,
// ErrExists: the caller's input), unavailable (ErrUnavailable: a shared engine
// that cannot serve now) and error (the engine failed otherwise). FileStats is
// passed through untimed: it feeds the metrics themselves. Safe for concurrent
// use as the wrapped store is.
type observedStore struct {
	s      store.Store
	ops    [numStoreOps]opMetrics
	closed atomic.Bool
	bucket bucketProbe // the object storage's answers to readiness (ops_bucket.go)
}

var _ store.Store = (*observedStore)(nil)

func newObservedStore(s store.Store, set *metrics.Set, hists *histograms) *observedStore {
	o := &observedStore{s: s}
	for i, name := range storeOpNames {
		m := &o.ops[i]
		prefix := `gateway_store_operations_total{op="` + name + `",result="`
		m.ok = set.NewCounter(prefix + `ok"}`)
		m.notFound = set.NewCounter(prefix + `not_found"}`)
		m.refused = set.NewCounter(prefix + `refused"}`)
		m.unavailable = set.NewCounter(prefix + `unavailable"}`)
		m.failed = set.NewCounter(prefix + `error"}`)
		m.duration = hists.get("gateway_store_operation_duration_seconds", `op="`+name+`"`)
	}
	return o
}

// done records one operation that started at start and ended with err.
func (o *observedStore) done(op storeOp, start time.Time, err error) {
	m := &o.ops[op]
	m.duration.Observe(time.Since(start))
	switch {
	case err == nil:
		m.ok.Inc()
	case errors.Is(err, store.ErrNotFound):
		m.notFound.Inc()
	case errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrExists):
		m.refused.Inc()
	case errors.Is(err, store.ErrUnavailable):
		m.unavailable.Inc()
	default:
		m.failed.Inc()
	}
}

func (o *observedStore) PutResponse(r store.Response) error {
	start := time.Now()
	err := o.s.PutResponse(r)
	o.done(opPutResponse, start, err)
	return err
}

func (o *observedStore) GetResponse(id string) (store.Response, error) {
	start := time.Now()
	r, err := o.s.GetResponse(id)
	o.done(opGetResponse, start, err)
	return r, err
}

func (o *observedStore) DeleteResponse(id string) error {
	start := time.Now()
	err := o.s.DeleteResponse(id)
	o.done(opDeleteResponse, start, err)
	return err
}

func (o *observedStore) ReclaimResponses(createdBefore time.Time) (int, error) {
	start := time.Now()
	n, err := o.s.ReclaimResponses(createdBefore)
	o.done(opReclaimResponses, start, err)
	return n, err
}

// PutFile's time includes reading r: for an upload, the client's sending.
func (o *observedStore) PutFile(f store.File, r io.Reader, max int64) (store.File, error) {
	start := time.Now()
	f, err := o.s.PutFile(f, r, max)
	o.done(opPutFile, start, err)
	return f, err
}

func (o *observedStore) GetFile(owner, id string, now time.Time) (store.File, error) {
	start := time.Now()
	f, err := o.s.GetFile(owner, id, now)
	o.done(opGetFile, start, err)
	return f, err
}

func (o *observedStore) AppendFileData(dst []byte, owner, id string, now time.Time) ([]byte, error) {
	start := time.Now()
	dst, err := o.s.AppendFileData(dst, owner, id, now)
	o.done(opAppendFileData, start, err)
	return dst, err
}

func (o *observedStore) DeleteFile(owner, id string) error {
	start := time.Now()
	err := o.s.DeleteFile(owner, id)
	o.done(opDeleteFile, start, err)
	return err
}

func (o *observedStore) ListFiles(owner string, q store.ListQuery) ([]store.File, bool, error) {
	start := time.Now()
	files, more, err := o.s.ListFiles(owner, q)
	o.done(opListFiles, start, err)
	return files, more, err
}

func (o *observedStore) ReclaimExpired(now time.Time) (int, error) {
	start := time.Now()
	n, err := o.s.ReclaimExpired(now)
	o.done(opReclaimExpired, start, err)
	return n, err
}

func (o *observedStore) FileStats() (count int64, bytes int64) { return o.s.FileStats() }

// storeChecker is a store whose engine may be unable to serve for a while (a shared
// engine on the network): Check says whether it can now, and when not, why in words
// fit for /readyz (no address, no secret).
type storeChecker interface {
	Check(ctx context.Context) error
}

// checkTimeout bounds the store check of one /readyz or /status answer.
const checkTimeout = time.Second

// check returns nil when the wrapped store can serve now (a store that cannot be
// unavailable always can), else the reason.
func (o *observedStore) check() error {
	c, ok := o.s.(storeChecker)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	return c.Check(ctx)
}

// Close closes the wrapped store; readiness reports the store closed after it.
func (o *observedStore) Close() error {
	o.closed.Store(true)
	return o.s.Close()
}

// appendOrphanMetric appends the objects without a record that the store's sweep removed,
// when the file bytes are in object storage (store.Blobs).
func appendOrphanMetric(b []byte, s store.Store) []byte {
	o, ok := s.(interface{ OrphansRemoved() int64 })
	if !ok {
		return b
	}
	b = promtext.AppendMetadata(b, "gateway_store_blob_orphans_removed_total", "counter",
		"objects of file bytes that no record named (an upload cut between its object and its record, a delete whose object removal failed, on redis a file that expired), removed by the sweep")
	b = append(b, "gateway_store_blob_orphans_removed_total "...)
	b = strconv.AppendInt(b, o.OrphansRemoved(), 10)
	return append(b, '\n')
}
