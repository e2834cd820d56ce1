package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Records are encoded as a version byte followed by fields in a fixed order: strings as a
// uvarint length and the bytes, integers as varints, times as a varint of Unix seconds and a
// uvarint of nanoseconds (so every time.Time, the zero one included, round-trips). The key
// carries the id (and the owner, for files), so the value does not repeat them.
const recordVersion = 1

var errCorrupt = errors.New("store: corrupt record")

// appendResponse appends the value of r's record: Owner, Model, Deployment, Created.
func appendResponse(dst []byte, r *Response) []byte {
	dst = append(dst, recordVersion)
	dst = appendString(dst, r.Owner)
	dst = appendString(dst, r.Model)
	dst = appendString(dst, r.Deployment)
	return appendTime(dst, r.Created)
}

// decodeResponse decodes a value of appendResponse into r, leaving r.ID alone.
func decodeResponse(b []byte, r *Response) error {
	d := decoder{b: b}
	d.version()
	r.Owner = d.interned()
	r.Model = d.interned()
	r.Deployment = d.interned()
	r.Created = d.time()
	return d.finish()
}

// appendFileMeta appends the value of f's metadata: Filename, MimeType, Purpose, Size,
// Created, Expires.
func appendFileMeta(dst []byte, f *File) []byte {
	dst = append(dst, recordVersion)
	dst = appendString(dst, f.Filename)
	dst = appendString(dst, f.MimeType)
	dst = appendString(dst, f.Purpose)
	dst = binary.AppendVarint(dst, f.Size)
	dst = appendTime(dst, f.Created)
	return appendTime(dst, f.Expires)
}

// decodeFileMeta decodes a value of appendFileMeta into f, leaving f.ID and f.Owner alone.
func decodeFileMeta(b []byte, f *File) error {
	d := decoder{b: b}
	d.version()
	f.Filename = d.string()
	f.MimeType = d.string()
	f.Purpose = d.string()
	f.Size = d.varint()
	f.Created = d.time()
	f.Expires = d.time()
	if d.err == nil && f.Size < 0 {
		d.err = errCorrupt
	}
	return d.finish()
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendTime(dst []byte, t time.Time) []byte {
	dst = binary.AppendVarint(dst, t.Unix())
	return binary.AppendUvarint(dst, uint64(t.Nanosecond()))
}

// decoder reads fields in order; the first error sticks and later reads return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.b = nil
}

func (d *decoder) version() {
	if len(d.b) == 0 || d.b[0] != recordVersion {
		d.fail()
		return
	}
	d.b = d.b[1:]
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string { return string(d.field()) }

// interned is string for the values of a few configured names; see interned.
func (d *decoder) interned() string { return interned.get(d.field()) }

// field returns the next length-prefixed field's bytes, which alias the record.
func (d *decoder) field() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	b := d.b[:n]
	d.b = d.b[n:]
	return b
}

func (d *decoder) time() time.Time {
	sec := d.varint()
	nsec := d.uvarint()
	if d.err != nil || nsec >= uint64(time.Second) {
		d.fail()
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt
	}
	if d.err != nil {
		return fmt.Errorf("cannot decode record: %w", d.err)
	}
	return nil
}
