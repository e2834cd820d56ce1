package store

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// ListFiles returns one page of owner's unexpired files as q describes (see ListQuery). It
// walks the owner's index between the cursors, forward or backward, a batch of entries at a
// time, reads their metadata with one MGET per batch, and stops at the first matching file
// past the page: hasMore is exact. Entries whose metadata expired are pruned from the index.
func (s *Redis) ListFiles(owner string, q ListQuery) ([]File, bool, error) {
	if !ValidOwner(owner) {
		return nil, false, fmt.Errorf("cannot list files: owner %q: %w", owner, ErrInvalid)
	}
	if len(q.IDs) > 0 {
		files, err := s.listIDs(owner, &q)
		return files, false, err
	}
	if q.Limit < 1 || q.Limit > MaxListLimit {
		return nil, false, fmt.Errorf("cannot list files: limit %d: %w", q.Limit, ErrInvalid)
	}
	// With Before alone the page is the one nearest the cursor: travel from it toward the
	// start of the list, then turn the page around.
	backFromBefore := q.Before != "" && q.After == ""
	w := indexWalk{forward: q.Desc == backFromBefore, lo: "-", hi: "+"}
	low, high := q.After, q.Before
	if q.Desc {
		low, high = high, low
	}
	if low != "" {
		w.lo = "(" + lexAfter(low)
	}
	if high != "" {
		w.hi = "(" + lexBefore(high)
	}
	files, hasMore, err := s.walkIndex(owner, &q, &w)
	if err != nil {
		return nil, false, err
	}
	if backFromBefore {
		slices.Reverse(files)
	}
	return files, hasMore, nil
}

// lexAfter and lexBefore return the exclusive index bounds of cursor c, whatever its length:
// an entry "<id>:<size>" sorts above lexAfter(c) exactly when id sorts above c, and below
// lexBefore(c) exactly when id sorts below c. Ids have FileIDLen bytes: the entry of id c
// itself sorts between c and c + ";", and a cursor longer than an id counts as its first
// FileIDLen bytes followed by more.
func lexAfter(c string) string {
	if len(c) < FileIDLen {
		return c
	}
	return c[:FileIDLen] + ";"
}

func lexBefore(c string) string {
	if len(c) <= FileIDLen {
		return c
	}
	return c[:FileIDLen] + ";"
}

// indexWalk is the state of a walk over an owner's index: the lex range still to visit and
// the direction.
type indexWalk struct {
	forward bool
	lo, hi  string // ZRANGEBYLEX bounds
}

// walkIndex collects up to q.Limit matching files in the direction of w, and whether one more
// matches.
func (s *Redis) walkIndex(owner string, q *ListQuery, w *indexWalk) ([]File, bool, error) {
	base := s.opts.KeyPrefix + ownerTag(owner)
	files := make([]File, 0, min(q.Limit, 16))
	batch := int64(q.Limit + 1)
	for {
		entries, err := s.indexRange(base+"i", w, batch)
		if err != nil {
			return nil, false, err
		}
		metas, err := s.mgetMeta(owner, base, entries)
		if err != nil {
			return nil, false, err
		}
		for _, m := range metas {
			if m == nil || m.Expired(q.Now) || (q.Purpose != "" && m.Purpose != q.Purpose) {
				continue
			}
			if len(files) == q.Limit {
				return files, true, nil
			}
			files = append(files, *m)
		}
		if int64(len(entries)) < batch {
			return files, false, nil
		}
		last := entries[len(entries)-1][:FileIDLen]
		if w.forward {
			w.lo = "(" + lexAfter(last)
		} else {
			w.hi = "(" + lexBefore(last)
		}
	}
}

// indexRange returns up to n index entries of w's range in w's direction.
func (s *Redis) indexRange(key string, w *indexWalk, n int64) ([]string, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	var cmd rueidis.Completed
	if w.forward {
		cmd = s.c.B().Zrangebylex().Key(key).Min(w.lo).Max(w.hi).Limit(0, n).Build()
	} else {
		cmd = s.c.B().Zrevrangebylex().Key(key).Max(w.hi).Min(w.lo).Limit(0, n).Build()
	}
	entries, err := s.c.Do(ctx, cmd).AsStrSlice()
	if err != nil {
		return nil, redisErr("list files", err)
	}
	for _, e := range entries {
		if len(e) <= FileIDLen || e[FileIDLen] != ':' {
			return nil, fmt.Errorf("cannot list files: malformed index entry %q: %w", e, errCorrupt)
		}
	}
	return entries, nil
}

// mgetMeta reads the metadata of the index entries; an entry whose metadata is gone gets nil
// and is pruned from the index.
func (s *Redis) mgetMeta(owner, base string, entries []string) ([]*File, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e[:FileIDLen]
	}
	keys, metas, err := s.readMetas(owner, base, ids)
	if err != nil {
		return nil, err
	}
	var gone []int
	for i, m := range metas {
		if m == nil {
			gone = append(gone, i)
		}
	}
	if len(gone) > 0 {
		s.prune(base, entries, keys, gone)
	}
	return metas, nil
}

// readMetas reads the metadata of owner's ids (under base, the owner's key prefix) with one
// MGET and returns the keys it read and the files, nil where there is none.
func (s *Redis) readMetas(owner, base string, ids []string) ([]string, []*File, error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = base + "f:" + id
	}
	ctx, cancel := s.ctx()
	defer cancel()
	vals, err := s.c.Do(ctx, s.c.B().Mget().Key(keys...).Build()).ToArray()
	if err != nil {
		return nil, nil, redisErr("list files", err)
	}
	metas := make([]*File, len(ids))
	for i, v := range vals {
		b, err := v.AsBytes()
		if rueidis.IsRedisNil(err) {
			continue
		}
		f := &File{ID: ids[i], Owner: owner}
		if err == nil {
			err = decodeFileMeta(b, f)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("cannot list file %q: %w", f.ID, err)
		}
		metas[i] = f
	}
	return keys, metas, nil
}

// prune drops the index entries gone (indexes into entries and keys) whose metadata is still
// absent, and takes them off the file counters. A failure is dropped: the next listing prunes.
func (s *Redis) prune(base string, entries, keys []string, gone []int) {
	pk := make([]string, 0, len(gone)+1)
	pk = append(pk, base+"i")
	args := make([]string, 0, len(gone))
	for _, i := range gone {
		pk = append(pk, keys[i])
		args = append(args, entries[i])
	}
	res, err := s.eval("prune file index", pruneScript, false, pk, args...)
	if err != nil {
		return
	}
	dropped, _ := res.AsStrSlice()
	var size int64
	for _, e := range dropped {
		n, _ := strconv.ParseInt(e[strings.IndexByte(e, ':')+1:], 10, 64)
		size += n
	}
	if len(dropped) > 0 {
		s.addStats(-int64(len(dropped)), -size)
	}
}

// listIDs returns the unexpired files of owner among q.IDs that match q.Purpose, in list
// order, read with one MGET.
func (s *Redis) listIDs(owner string, q *ListQuery) ([]File, error) {
	ids := slices.Clone(q.IDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > MaxListLimit {
		return nil, fmt.Errorf("cannot list files: %d ids: %w", len(ids), ErrInvalid)
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return !ValidFileID(id) })
	if len(ids) == 0 {
		return nil, nil
	}
	_, metas, err := s.readMetas(owner, s.opts.KeyPrefix+ownerTag(owner), ids)
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(ids))
	for _, f := range metas {
		if f != nil && !f.Expired(q.Now) && (q.Purpose == "" || f.Purpose == q.Purpose) {
			files = append(files, *f)
		}
	}
	if q.Desc {
		slices.Reverse(files)
	}
	return files, nil
}
