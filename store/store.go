// Package store owns the gateway's durable records: Responses ownership records (which caller
// key created a response, through which route model and upstream deployment) and user-data
// files (metadata and bytes, owned by the uploading key, with an expiry); and the records of
// the callers' keys made at runtime, with the version that every node follows (KeyStore).
//
// The Store interface is what the proxy uses. Pebble is the embedded engine of one node; Redis
// is the shared engine on a Redis Cluster that many gateway nodes use at once. The interface
// carries no engine types, and one conformance suite holds both engines to it.
//
// The package does not own authentication, the HTTP shapes of files or responses, the
// validation of client query parameters (the proxy does that), response ids (the upstream
// assigns them) or the schedule of reclamation: the caller runs ReclaimExpired and
// ReclaimResponses when it sees fit. It imports nothing else of the project.
package store

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Sentinel errors. Callers test them with errors.Is: engines may wrap them with context.
var (
	// ErrNotFound reports a record that is absent, expired, or owned by someone else: the
	// three are indistinguishable on purpose.
	ErrNotFound = errors.New("store: not found")
	// ErrTooLarge reports an upload longer than the maximum given to PutFile.
	ErrTooLarge = errors.New("store: file too large")
	// ErrExists reports a caller-chosen file id that is already in use by that owner.
	ErrExists = errors.New("store: file id already in use")
	// ErrInvalid reports an argument the store refuses: an owner that is empty, too long or
	// holds a NUL byte, a malformed file id on upload, a field over its length limit, a list
	// limit out of range.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrLocked reports a store directory that another process (or another open store of
	// this process) holds: one directory serves one gateway at a time.
	ErrLocked = errors.New("store: held by another process")
	// ErrUnavailable reports a shared engine that cannot serve the call now: unreachable,
	// failing over, or short of the replicas a write must reach before it is acknowledged.
	// The call may be retried; a write that failed with it may or may not have been applied.
	ErrUnavailable = errors.New("store: unavailable")
)

// Limits enforced by every engine.
const (
	// MaxOwnerLen is the longest owner (caller key id) in bytes.
	MaxOwnerLen = 256
	// MaxResponseIDLen is the longest response id in bytes; longer ids are never stored.
	MaxResponseIDLen = 256
	// MaxFieldLen is the longest model, deployment, filename, mime type or purpose in bytes.
	MaxFieldLen = 1024
	// MaxListLimit is the largest ListQuery.Limit and the most ListQuery.IDs after
	// deduplication.
	MaxListLimit = 100
)

// Store holds ownership records and user-data files.
//
// Implementations are safe for concurrent use by many goroutines. A write that returns nil is
// durable: it survives a crash of the gateway process (kill -9), and also a crash of the
// machine when the engine is set to (see Durability). Reclaim methods are
// idempotent and may run concurrently with each other and with every other method, from any
// number of gateway nodes sharing the data.
//
// Owners are opaque byte strings of 1..MaxOwnerLen bytes that hold no NUL byte (see
// ValidOwner); any method given another owner fails with ErrInvalid.
type Store interface {
	// PutResponse records r, replacing any record with the same id. r.ID, r.Owner, r.Model
	// and r.Deployment must be non-empty and within their limits.
	PutResponse(r Response) error
	// GetResponse returns the record of id, or ErrNotFound. The caller compares Owner: a
	// record of another owner must be answered as not found.
	GetResponse(id string) (Response, error)
	// DeleteResponse removes the record of id, or returns ErrNotFound when there is none.
	DeleteResponse(id string) error
	// ReclaimResponses removes the records created before createdBefore and returns how many
	// it removed.
	ReclaimResponses(createdBefore time.Time) (int, error)

	// PutFile stores the bytes read from r under f and returns f with ID and Size set.
	//
	// When f.ID is empty the store assigns NewFileID(f.Created); otherwise f.ID must satisfy
	// ValidFileID and must not be in use by f.Owner (ErrExists). It reads at most maxSize
	// bytes (and one more to tell a longer body): a longer body fails with ErrTooLarge. The file becomes visible atomically, only once
	// every byte and its metadata are durable. Any failure (reader error, too large, disk)
	// leaves nothing visible and nothing behind. Memory use is bounded by the engine's chunk
	// size, not by the file size. f.Expires zero means the file never expires.
	//
	// When r implements FileFinisher, every engine calls its FinishFile exactly once, after r
	// has returned io.EOF and every byte is written but before the file becomes visible, and
	// never when the upload failed before. The expiry it sets replaces f.Expires; an error it
	// returns fails PutFile (wrapped, for errors.Is and errors.As) and leaves nothing stored.
	// So a caller that learns the expiry only after the file's bytes (a multipart form that
	// sends the file first) can still stream them.
	PutFile(f File, r io.Reader, maxSize int64) (File, error)
	// GetFile returns the metadata of an unexpired file of owner, or ErrNotFound.
	GetFile(owner, id string, now time.Time) (File, error)
	// AppendFileData appends the bytes of an unexpired file of owner to dst and returns the
	// extended slice, or ErrNotFound.
	AppendFileData(dst []byte, owner, id string, now time.Time) ([]byte, error)
	// DeleteFile removes an unexpired file of owner with its bytes, or returns ErrNotFound.
	// Expiry is judged against the engine's clock.
	DeleteFile(owner, id string) error
	// ListFiles returns one page of the unexpired files of owner, as q describes, and whether
	// more files lie beyond the page in the direction of travel.
	ListFiles(owner string, q ListQuery) (files []File, hasMore bool, err error)
	// ReclaimExpired removes the files (metadata and bytes) whose Expires is at or before now
	// and returns how many it removed. Expired files are invisible before they are reclaimed.
	ReclaimExpired(now time.Time) (int, error)
	// FileStats returns the number of stored files and the sum of their sizes. It is cheap
	// (kept as counters) and meant for metrics: expired files count until reclaimed, and a
	// distributed engine may report cluster totals with some lag.
	FileStats() (count int64, bytes int64)

	// Close releases the engine. No method may be called during or after Close.
	Close() error
}

// FileFinisher may be implemented by the reader given to PutFile: FinishFile runs once the
// reader has returned io.EOF and every chunk is written, before the file is committed. It may
// set f.Expires (and nothing else), or fail the upload with an error, in which case nothing is
// stored (the written chunks are deleted, as for any PutFile error).
//
// f holds what PutFile will store, ID and Size included. A change to any other field than
// Expires fails the upload with ErrInvalid.
type FileFinisher interface{ FinishFile(f *File) error }

// Response is the ownership record of a Responses object. Its zero value is not storable.
type Response struct {
	ID         string    // upstream response id (resp_...), 1..MaxResponseIDLen bytes
	Owner      string    // caller key id
	Model      string    // route model the response was created with
	Deployment string    // upstream deployment that holds the response
	Created    time.Time // nanosecond precision, read back in UTC; zero counts as oldest
}

// File is the metadata of a user-data file. Downloadable is always false for uploaded files
// and is therefore not a field: the proxy prints it.
type File struct {
	ID       string // file_svc_ + ULID, see NewFileID
	Owner    string // caller key id of the uploader
	Filename string // as uploaded, at most MaxFieldLen bytes
	MimeType string // at most MaxFieldLen bytes
	Purpose  string // at most MaxFieldLen bytes; "" is a valid purpose
	Size     int64  // bytes, set by PutFile
	Created  time.Time
	Expires  time.Time // zero: never expires
}

// Expired reports whether f is invisible at now: Expires is set and not after now.
func (f *File) Expired(now time.Time) bool {
	return !f.Expires.IsZero() && !f.Expires.After(now)
}

// ListQuery selects one page of ListFiles. The zero value is not valid: Limit must be set.
//
// List order is by file id (which is creation time order): ascending, or descending when Desc
// is set. After and Before are exclusive cursors in list order. With After alone (or no
// cursor) the page holds the first Limit files after it; with Before alone it holds the last
// Limit files before it (the page "immediately before" the cursor, for the older alpha list's
// before_id); with both it holds the first Limit files between them. The page is always in
// list order, and hasMore reports whether more files exist beyond the page in the direction
// of travel: after its end (After or no cursor) or before its start (Before alone).
type ListQuery struct {
	Now     time.Time // files with Expires at or before Now are invisible
	Limit   int       // 1..MaxListLimit; ignored in IDs mode
	Desc    bool      // newest first when true
	After   string    // exclusive cursor: continue after this file id in list order
	Before  string    // exclusive cursor the other way; "" = none
	Purpose string    // filter; "" = any
	// IDs, when non-empty, selects exactly these files (owned by the caller, unexpired,
	// matching Purpose), in list order, ignoring Limit and cursors; other ids are skipped.
	// Duplicates are removed; at most MaxListLimit distinct ids.
	IDs []string
}

// ValidOwner reports whether s can own records: 1..MaxOwnerLen bytes and no NUL byte.
func ValidOwner(s string) bool {
	return s != "" && len(s) <= MaxOwnerLen && strings.IndexByte(s, 0) < 0
}

// unexpiredFile is GetFile on top of an engine's meta, which returns the
// metadata of owner's id whether it expired or not, or ErrNotFound.
func unexpiredFile(meta func(owner, id string) (File, error), owner, id string, now time.Time) (File, error) {
	if !ValidOwner(owner) {
		return File{}, fmt.Errorf("cannot get file: owner %q: %w", owner, ErrInvalid)
	}
	f, err := meta(owner, id)
	if err != nil {
		return File{}, err
	}
	if f.Expired(now) {
		return File{}, ErrNotFound
	}
	return f, nil
}
