package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/minio/minio-go/v7"
)

// CheckBucket reports whether the bucket answers, for a readiness probe or a start-up log
// line: nil, or an ErrUnavailable whose text says why in words (see S3Reason), without the
// endpoint or a key. One request, a HEAD of the bucket, bounded by ctx.
func (b *Blobs) CheckBucket(ctx context.Context) error {
	ok, err := b.obj.c.BucketExists(ctx, b.obj.bucket)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s", ErrUnavailable, S3Reason(err))
	case !ok:
		return fmt.Errorf("%w: the bucket does not exist", ErrUnavailable)
	}
	return nil
}

// S3Reason says in words why a call to the object storage failed, for a probe's answer or
// a status page: no address, no key, only the kind of failure and the service's error code.
func S3Reason(err error) string {
	var ne net.Error
	resp := minio.ToErrorResponse(err)
	switch {
	case err == nil:
		return "no error"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "object storage refused the connection (no server on the port)"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "object storage did not answer in time"
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		return "object storage closed the connection"
	case resp.StatusCode == 403:
		return "object storage refused the credentials (403 " + safeCode(resp.Code) + ")"
	case resp.StatusCode != 0:
		return fmt.Sprintf("object storage answered %d %s", resp.StatusCode, safeCode(resp.Code))
	}
	return "object storage is unreachable"
}

// safeCode returns an S3 error code as the service sent it when it is a plain word (as
// AccessDenied or SlowDown are), else a placeholder: the text goes to a probe's answer.
func safeCode(code string) string {
	if code == "" || len(code) > 64 {
		return "error"
	}
	for _, c := range code {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return "error"
		}
	}
	return code
}
