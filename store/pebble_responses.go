package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// reclaimGroup is how many records one reclaim commit removes at most.
const reclaimGroup = 128

// keyBufs hold the keys of lookups. The key escapes through Pebble's Get, so
// one on the stack would be moved to the heap each time; Get's contract lets
// the caller reuse it once Get returns.
var keyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64); return &b }}

// PutResponse durably records r under r.ID, replacing an earlier record of that id.
func (p *Pebble) PutResponse(r Response) error {
	if err := validateResponse(&r); err != nil {
		return err
	}
	key := appendResponseKey(make([]byte, 0, 64), r.ID)
	val := appendResponse(make([]byte, 0, 64), &r)
	b := p.db.NewBatch()
	defer b.Close()
	_ = b.Set(key, val, nil)
	// A replaced record leaves its old age entry behind; ReclaimResponses drops it.
	_ = b.Set(appendResponseAgeKey(key[:0], r.Created, r.ID), nil, nil)

	// What GetResponse reads back: Created as the record keeps it.
	held := &Response{ID: r.ID, Owner: r.Owner, Model: r.Model, Deployment: r.Deployment,
		Created: time.Unix(r.Created.Unix(), int64(r.Created.Nanosecond())).UTC()}

	mu := &p.locks.mu[p.locks.of(r.ID)]
	mu.Lock()
	err := b.Commit(pebble.Sync)
	if err == nil {
		p.recent.put(held)
	}
	mu.Unlock()
	if err != nil {
		return fmt.Errorf("cannot put response %q: %w", r.ID, err)
	}
	return nil
}

func validateResponse(r *Response) error {
	switch {
	case r.ID == "" || len(r.ID) > MaxResponseIDLen:
		return fmt.Errorf("cannot put response: id of %d bytes: %w", len(r.ID), ErrInvalid)
	case !ValidOwner(r.Owner):
		return fmt.Errorf("cannot put response %q: owner %q: %w", r.ID, r.Owner, ErrInvalid)
	case r.Model == "" || len(r.Model) > MaxFieldLen:
		return fmt.Errorf("cannot put response %q: model of %d bytes: %w", r.ID, len(r.Model), ErrInvalid)
	case r.Deployment == "" || len(r.Deployment) > MaxFieldLen:
		return fmt.Errorf("cannot put response %q: deployment of %d bytes: %w", r.ID, len(r.Deployment), ErrInvalid)
	}
	return nil
}

// GetResponse returns the record of id, or ErrNotFound.
func (p *Pebble) GetResponse(id string) (Response, error) {
	if id == "" || len(id) > MaxResponseIDLen {
		return Response{}, ErrNotFound
	}
	if r, ok := p.recent.get(id); ok {
		return r, nil
	}
	buf := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(buf)
	key := appendResponseKey((*buf)[:0], id)
	*buf = key
	v, closer, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return Response{}, ErrNotFound
	}
	if err != nil {
		return Response{}, fmt.Errorf("cannot get response %q: %w", id, err)
	}
	r := Response{ID: id}
	err = decodeResponse(v, &r)
	closer.Close()
	if err != nil {
		return Response{}, fmt.Errorf("cannot get response %q: %w", id, err)
	}
	return r, nil
}

// DeleteResponse durably removes the record of id, or returns ErrNotFound.
func (p *Pebble) DeleteResponse(id string) error {
	if id == "" || len(id) > MaxResponseIDLen {
		return ErrNotFound
	}
	mu := &p.locks.mu[p.locks.of(id)]
	mu.Lock()
	defer mu.Unlock()
	r, err := p.GetResponse(id)
	if err != nil {
		return err
	}
	b := p.db.NewBatch()
	defer b.Close()
	key := appendResponseKey(nil, id)
	_ = b.Delete(key, nil)
	_ = b.Delete(appendResponseAgeKey(key[:0], r.Created, id), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot delete response %q: %w", id, err)
	}
	p.recent.drop(id)
	return nil
}

// ReclaimResponses removes the records created before createdBefore, a group of them per
// synced commit, and returns how many it removed.
func (p *Pebble) ReclaimResponses(createdBefore time.Time) (int, error) {
	upper := binary.BigEndian.AppendUint64([]byte(prefixResponseAge), sortableNanos(createdBefore))
	return p.reclaimRange([]byte(prefixResponseAge), upper, "responses", p.reclaimResponseGroup)
}

// reclaimResponseGroup removes the records named by a group of age keys, provided each record
// still carries the time of its key; age keys of replaced or deleted records just go.
func (p *Pebble) reclaimResponseGroup(ageKeys [][]byte) (int, error) {
	if len(ageKeys) == 0 {
		return 0, nil
	}
	idx := make([]int, 0, len(ageKeys))
	for _, k := range ageKeys {
		_, id, _ := parseResponseAgeKey(k)
		idx = append(idx, p.locks.of(string(id)))
	}
	unlock := p.locks.lockSet(idx)
	defer unlock()

	b := p.db.NewBatch()
	defer b.Close()
	var gone []string
	for _, k := range ageKeys {
		created, id, ok := parseResponseAgeKey(k)
		if !ok {
			return 0, fmt.Errorf("cannot reclaim responses: malformed key %q", k)
		}
		r, err := p.GetResponse(string(id))
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return 0, err
		case sortableNanos(r.Created) == created:
			_ = b.Delete(appendResponseKey(nil, r.ID), nil)
			gone = append(gone, r.ID)
		}
		_ = b.Delete(k, nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, fmt.Errorf("cannot reclaim responses: %w", err)
	}
	for _, id := range gone {
		p.recent.drop(id)
	}
	return len(gone), nil
}
