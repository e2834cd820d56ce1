package store

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// ListFiles returns one page of owner's unexpired files as q describes (see ListQuery). It is
// a scan of owner's metadata prefix between the cursors, forward or backward, that stops at
// the first matching file past the page: hasMore is exact.
func (p *Pebble) ListFiles(owner string, q ListQuery) ([]File, bool, error) {
	if !ValidOwner(owner) {
		return nil, false, fmt.Errorf("cannot list files: owner %q: %w", owner, ErrInvalid)
	}
	if len(q.IDs) > 0 {
		files, err := p.listIDs(owner, &q)
		return files, false, err
	}
	if q.Limit < 1 || q.Limit > MaxListLimit {
		return nil, false, fmt.Errorf("cannot list files: limit %d: %w", q.Limit, ErrInvalid)
	}
	prefix := appendOwnerPrefix(nil, owner)
	lo, hi := listBounds(prefix, &q)
	if bytes.Compare(lo, hi) >= 0 {
		return nil, false, nil
	}
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, false, fmt.Errorf("cannot list files: %w", err)
	}
	defer it.Close()

	// With Before alone the page is the one nearest the cursor: travel from it toward the
	// start of the list, then turn the page around.
	backFromBefore := q.Before != "" && q.After == ""
	forward := q.Desc == backFromBefore
	files := make([]File, 0, min(q.Limit, 16))
	hasMore := false
	ok := it.First()
	if !forward {
		ok = it.Last()
	}
	for ; ok; ok = step(it, forward) {
		f, err := decodeListed(it, owner, len(prefix))
		if err != nil {
			return nil, false, err
		}
		if f.Expired(q.Now) || (q.Purpose != "" && f.Purpose != q.Purpose) {
			continue
		}
		if len(files) == q.Limit {
			hasMore = true
			break
		}
		files = append(files, f)
	}
	if err := it.Error(); err != nil {
		return nil, false, fmt.Errorf("cannot list files: %w", err)
	}
	if backFromBefore {
		slices.Reverse(files)
	}
	return files, hasMore, nil
}

// listBounds returns the key range [lo, hi) of owner's files strictly between q's cursors.
// In ascending order After is the low end and Before the high end; descending swaps them.
func listBounds(prefix []byte, q *ListQuery) (lo, hi []byte) {
	low, high := q.After, q.Before
	if q.Desc {
		low, high = high, low
	}
	lo = prefix
	if low != "" {
		lo = append(append(slices.Clip(prefix), low...), 0) // the smallest key after low
	}
	hi = prefixEnd(prefix)
	if high != "" {
		hi = append(slices.Clip(prefix), high...)
	}
	return lo, hi
}

// step moves it one key in key order: forward (ascending) or backward.
func step(it *pebble.Iterator, forward bool) bool {
	if forward {
		return it.Next()
	}
	return it.Prev()
}

// listIDs returns the unexpired files of owner among q.IDs that match q.Purpose, in list
// order, read through one iterator so they come from one consistent view.
func (p *Pebble) listIDs(owner string, q *ListQuery) ([]File, error) {
	ids := slices.Clone(q.IDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > MaxListLimit {
		return nil, fmt.Errorf("cannot list files: %d ids: %w", len(ids), ErrInvalid)
	}
	prefix := appendOwnerPrefix(nil, owner)
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("cannot list files: %w", err)
	}
	defer it.Close()
	files := make([]File, 0, len(ids))
	key := slices.Clip(prefix)
	for _, id := range ids {
		if !ValidFileID(id) {
			continue
		}
		key = append(key[:len(prefix)], id...)
		if !it.SeekGE(key) || !bytes.Equal(it.Key(), key) {
			continue
		}
		f, err := decodeListed(it, owner, len(prefix))
		if err != nil {
			return nil, err
		}
		if f.Expired(q.Now) || (q.Purpose != "" && f.Purpose != q.Purpose) {
			continue
		}
		files = append(files, f)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("cannot list files: %w", err)
	}
	if q.Desc {
		slices.Reverse(files)
	}
	return files, nil
}

// decodeListed decodes the metadata at it, whose key is owner's prefix (of prefixLen bytes)
// and the file id.
func decodeListed(it *pebble.Iterator, owner string, prefixLen int) (File, error) {
	f := File{ID: string(it.Key()[prefixLen:]), Owner: owner}
	v, err := it.ValueAndErr()
	if err == nil {
		err = decodeFileMeta(v, &f)
	}
	if err != nil {
		return File{}, fmt.Errorf("cannot list file %q: %w", f.ID, err)
	}
	return f, nil
}
