package store

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Defaults and bounds of S3Options.
const (
	// DefaultS3PartSize is the part of a multipart upload: the bytes of one upload held in
	// memory at once. S3 wants at least 5 MiB for every part but the last.
	DefaultS3PartSize = 5 << 20
	// MinS3PartSize and MaxS3PartSize bound S3Options.PartSize.
	MinS3PartSize = 5 << 20
	MaxS3PartSize = 64 << 20
	// DefaultS3Timeout bounds one call to the object storage.
	DefaultS3Timeout = 30 * time.Second
	// DefaultOrphanGrace is how old an object without a record must be before the sweep
	// removes it: uploads in progress are younger.
	DefaultOrphanGrace = 15 * time.Minute
	// DefaultSweepBudget is how many objects one sweep looks at.
	DefaultSweepBudget = 1000
)

// S3Options configure the S3-compatible object storage that holds file bytes (see
// OpenBlobs). The zero value of every field but Endpoint, Bucket and the keys means its
// default.
type S3Options struct {
	// Endpoint is the URL of the service: http://host:port or https://host:port.
	Endpoint string
	Bucket   string // must exist
	Region   string // "" lets the client ask the service
	// Prefix is put before every object name, so a bucket can be shared.
	Prefix    string
	AccessKey string
	SecretKey string
	// PathStyle addresses the bucket in the path (http://host/bucket/key), as most
	// self-hosted services want, rather than in the host name.
	PathStyle bool
	// TLS is the client's TLS configuration for an https endpoint; nil means the system's.
	TLS *tls.Config
	// PartSize is the size of the parts of a multipart upload and bounds the memory of one
	// upload; 0 means DefaultS3PartSize.
	PartSize int
	// Timeout bounds one call to the service; 0 means DefaultS3Timeout.
	Timeout time.Duration
	// OrphanGrace is the age after which an object without a record is removed by the sweep;
	// an upload whose record is not committed within half of it fails. 0 means
	// DefaultOrphanGrace.
	OrphanGrace time.Duration
	// SweepBudget is the number of objects one sweep looks at, resuming where the previous
	// one stopped; 0 means DefaultSweepBudget.
	SweepBudget int
}

// EnsureDefaults fills the zero fields of o with their defaults.
func (o *S3Options) EnsureDefaults() {
	if o.PartSize == 0 {
		o.PartSize = DefaultS3PartSize
	}
	setDefault(&o.Timeout, DefaultS3Timeout)
	setDefault(&o.OrphanGrace, DefaultOrphanGrace)
	if o.SweepBudget == 0 {
		o.SweepBudget = DefaultSweepBudget
	}
}

// Validate reports the first field of o that is out of range.
func (o *S3Options) Validate() error {
	if _, _, err := parseS3Endpoint(o.Endpoint); err != nil {
		return err
	}
	switch {
	case o.Bucket == "":
		return errors.New("store: S3 Bucket is empty")
	case o.AccessKey == "" || o.SecretKey == "":
		return errors.New("store: S3 AccessKey and SecretKey are required")
	case o.PartSize < MinS3PartSize || o.PartSize > MaxS3PartSize:
		return fmt.Errorf("store: S3 PartSize %d is out of range %d..%d", o.PartSize, MinS3PartSize, MaxS3PartSize)
	case o.Timeout <= 0 || o.OrphanGrace <= 0 || o.SweepBudget <= 0:
		return errors.New("store: S3 Timeout, OrphanGrace and SweepBudget must be positive")
	}
	return nil
}

// parseS3Endpoint splits an endpoint URL into the host:port the client dials and whether
// it speaks TLS.
func parseS3Endpoint(endpoint string) (host string, secure bool, err error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", false, fmt.Errorf("store: S3 Endpoint %q is not http(s)://host[:port]", endpoint)
	}
	return u.Host, u.Scheme == "https", nil
}

// objects is the client of one bucket and prefix.
type objects struct {
	c      *minio.Core
	bucket string
	prefix string
	opts   S3Options
}

func newObjects(o S3Options) (*objects, error) {
	host, secure, err := parseS3Endpoint(o.Endpoint)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.ResponseHeaderTimeout = o.Timeout
	if o.TLS != nil {
		tr.TLSClientConfig = o.TLS
	}
	lookup := minio.BucketLookupAuto
	if o.PathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.NewCore(host, &minio.Options{
		Creds: credentials.NewStaticV4(o.AccessKey, o.SecretKey, ""), Secure: secure,
		Transport: tr, Region: o.Region, BucketLookup: lookup,
		MaxRetries: 1, // the caller answers 503 and the client retries: no waiting here
	})
	if err != nil {
		return nil, fmt.Errorf("cannot create the S3 client: %w", err)
	}
	return &objects{c: c, bucket: o.Bucket, prefix: o.Prefix, opts: o}, nil
}

func (o *objects) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), o.opts.Timeout)
}

// objectName is the name of the object of owner's id: the prefix, the owner in unpadded
// base64url (owners are arbitrary bytes) and the id.
func (o *objects) objectName(owner, id string) string {
	return o.prefix + base64.RawURLEncoding.EncodeToString([]byte(owner)) + "/" + id
}

// parseObjectName is objectName backwards; ok is false for a name that is not one of ours.
func (o *objects) parseObjectName(name string) (owner, id string, ok bool) {
	rest, ok := strings.CutPrefix(name, o.prefix)
	if !ok {
		return "", "", false
	}
	enc, id, ok := strings.Cut(rest, "/")
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil || !ValidOwner(string(b)) || !ValidFileID(id) {
		return "", "", false
	}
	return string(b), id, true
}

// s3Err wraps an error of the object storage: the service is unreachable or refuses, so
// the call may be retried later (ErrUnavailable).
func s3Err(what string, err error) error {
	return fmt.Errorf("cannot %s: object storage: %w: %w", what, ErrUnavailable, err)
}

// noSuchKey reports an error that says the object does not exist.
func noSuchKey(err error) bool {
	return minio.ToErrorResponse(err).Code == minio.NoSuchKey
}

// put writes an object of the bytes b (see idempotent).
func (o *objects) put(name string, b []byte) error {
	err := idempotent(b, func(r io.Reader) error {
		ctx, cancel := o.ctx()
		defer cancel()
		_, err := o.c.PutObject(ctx, o.bucket, name, r, int64(len(b)), "", "", minio.PutObjectOptions{})
		return err
	})
	if err != nil {
		return s3Err("write file data", err)
	}
	return nil
}

// idempotent runs a write of the bytes b that may be made twice (a PUT of an object or of
// a part: the same name, the same bytes) and makes it once more when it failed as
// sendAgain says. Each send reads b through a reader of its own, which is stopped once
// the send returned: Go's transport may go on writing a request's body after its answer
// came (an early 400), and minio closes no body of the caller's, so a send that ended can
// still be reading; stopped, it reads nothing more of b, which the retry, and the caller
// after it, may then use.
func idempotent(b []byte, write func(r io.Reader) error) error {
	for try := 0; ; try++ {
		r := &sendReader{}
		r.r.Reset(b)
		err := write(r)
		r.stop()
		if err == nil || try > 0 || !sendAgain(err) {
			return err
		}
	}
}

// sendReader is one send's reader of a write's bytes (see idempotent).
type sendReader struct {
	mu      sync.Mutex
	r       bytes.Reader
	stopped bool
}

// errSendEnded is what a send that ended reads.
var errSendEnded = errors.New("store: the send ended")

func (s *sendReader) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return 0, errSendEnded
	}
	return s.r.Read(p)
}

// Seek is bytes.Reader's, for a client that rewinds a body it sends again.
func (s *sendReader) Seek(offset int64, whence int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return 0, errSendEnded
	}
	return s.r.Seek(offset, whence)
}

// stop ends the send's reads: none is under way once it returns.
func (s *sendReader) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

// sendAgain reports whether a request that only reads, or writes what it would write
// again, may be made once more after err: the service gave no answer, as a kept-alive
// connection it closed while idle gives (Go's transport resends only GET-like requests
// then, and the client is made with one try so that a service down is answered at once),
// or it answered that it could not parse the request (400 BadRequest, not an error about
// what the request asked), as versitygw was seen to answer one request of many at once.
func sendAgain(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.StatusCode == 0 || r.StatusCode == http.StatusBadRequest && r.Code == "BadRequest"
}

// remove deletes an object; an object that is not there is no error.
func (o *objects) remove(name string) error {
	ctx, cancel := o.ctx()
	defer cancel()
	if err := o.c.RemoveObject(ctx, o.bucket, name, minio.RemoveObjectOptions{}); err != nil && !noSuchKey(err) {
		return s3Err("remove file data", err)
	}
	return nil
}

// appendObject appends the object, which must hold exactly size bytes, to dst: it is read
// straight into dst, never held twice. A missing object is ErrNotFound.
func (o *objects) appendObject(dst []byte, name string, size int64) ([]byte, error) {
	ctx, cancel := o.ctx()
	defer cancel()
	body, _, _, err := o.c.GetObject(ctx, o.bucket, name, minio.GetObjectOptions{})
	if err != nil && !noSuchKey(err) && ctx.Err() == nil && sendAgain(err) {
		body, _, _, err = o.c.GetObject(ctx, o.bucket, name, minio.GetObjectOptions{}) // it only reads
	}
	if err != nil {
		if noSuchKey(err) {
			return dst, ErrNotFound
		}
		return dst, s3Err("read file data", err)
	}
	defer body.Close()
	start := len(dst)
	dst = growLen(dst, int(size))
	if _, err := io.ReadFull(body, dst[start:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return dst[:start], fmt.Errorf("cannot read file data %q: shorter than %d bytes: %w", name, size, errCorrupt)
		}
		return dst[:start], s3Err("read file data", err)
	}
	var one [1]byte
	if n, _ := body.Read(one[:]); n > 0 {
		return dst[:start], fmt.Errorf("cannot read file data %q: longer than %d bytes: %w", name, size, errCorrupt)
	}
	return dst, nil
}

// growLen extends dst by n bytes, reallocating at most once.
func growLen(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		dst = append(make([]byte, 0, len(dst)+n), dst...)
	}
	return dst[:len(dst)+n]
}

// objectInfo is what a sweep needs of one listed object.
type objectInfo struct {
	name     string
	modified time.Time
}

// list returns up to max objects after startAfter, in name order, and whether the listing
// reached its end.
func (o *objects) list(startAfter string, max int) ([]objectInfo, bool, error) {
	ctx, cancel := o.ctx()
	defer cancel()
	var out []objectInfo
	token := ""
	for len(out) < max {
		res, err := o.c.ListObjectsV2(o.bucket, o.prefix, startAfter, token, "", min(max-len(out), 1000))
		if err != nil && ctx.Err() == nil {
			// A listing only reads: asked once more on any failure (see sendAgain).
			res, err = o.c.ListObjectsV2(o.bucket, o.prefix, startAfter, token, "", min(max-len(out), 1000))
		}
		if err != nil {
			return out, false, s3Err("list file data", err)
		}
		for _, obj := range res.Contents {
			out = append(out, objectInfo{name: obj.Key, modified: obj.LastModified})
		}
		if !res.IsTruncated {
			return out, true, nil
		}
		token = res.NextContinuationToken
		if ctx.Err() != nil {
			return out, false, s3Err("list file data", ctx.Err())
		}
	}
	return out, false, nil
}
