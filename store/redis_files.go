package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// PutFile claims owner's id, streams r into chunks of RedisChunkSize under a staging key
// whose TTL (UploadTTL) each chunk renews, runs the FileFinisher of r if it has one, then
// commits metadata, data and index entry in one script in the owner's hash slot and waits for
// Replicas replicas. A crashed upload leaves only the staging key and the claim, which expire
// by themselves; any other failure removes them at once. A commit that too few replicas
// confirm is undone (when Redis lets it be) and fails with ErrUnavailable.
func (s *Redis) PutFile(f File, r io.Reader, maxSize int64) (File, error) {
	return uploadFile(f, r, maxSize, s.opts.ChunkSize, s.beginUpload)
}

// redisUpload is one PutFile of the Redis engine: the file's keys, the token of its claim and
// the chunks pushed so far.
type redisUpload struct {
	s      *Redis
	k      fileKeys
	token  string
	ttl    int64 // UploadTTL in milliseconds
	chunks int
}

func (s *Redis) beginUpload(f *File) (upload, error) {
	u := &redisUpload{s: s, k: s.fileKeys(f.Owner, f.ID), ttl: s.opts.UploadTTL.Milliseconds()}
	var err error
	if u.token, err = s.claimUpload(&u.k, f.ID); err != nil {
		return nil, err
	}
	return u, nil
}

func (u *redisUpload) put(_ uint32, chunk []byte) error {
	if err := u.s.pushChunk(&u.k, chunk, u.ttl); err != nil {
		return err
	}
	u.chunks++
	return nil
}

func (u *redisUpload) commit(f *File) error {
	if err := u.s.commitFile(&u.k, f, u.token, u.chunks); err != nil {
		return err
	}
	u.s.addStats(1, f.Size)
	return nil
}

func (u *redisUpload) abort() error {
	_, err := u.s.eval("abort upload", abortScript, false, []string{u.k.claim, u.k.staging}, u.token)
	return err
}

func (u *redisUpload) end() {}

// claimUpload marks owner's id as being uploaded, after checking that no file uses it, and
// returns the token of the claim.
func (s *Redis) claimUpload(k *fileKeys, id string) (string, error) {
	var b [16]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	ttl := strconv.FormatInt(s.opts.UploadTTL.Milliseconds(), 10)
	res, err := s.eval("put file", claimScript, false, []string{k.meta, k.claim, k.staging}, token, ttl)
	if err != nil {
		return "", err
	}
	if ok, _ := res.AsInt64(); ok != 1 {
		return "", fmt.Errorf("cannot put file %q: %w", id, ErrExists)
	}
	return token, nil
}

// pushChunk appends one chunk to the staging list and renews the TTL of the list and claim.
// The command refers to chunk without a copy (rueidis.BinaryString): when it fails, the
// client may still write it later, so the caller must not reuse chunk (see writeChunks).
func (s *Redis) pushChunk(k *fileKeys, chunk []byte, ttl int64) error {
	ctx, cancel := s.ctx()
	defer cancel()
	res := s.c.DoMulti(ctx,
		s.c.B().Rpush().Key(k.staging).Element(rueidis.BinaryString(chunk)).Build(),
		s.c.B().Pexpire().Key(k.staging).Milliseconds(ttl).Build(),
		s.c.B().Pexpire().Key(k.claim).Milliseconds(ttl).Build())
	for _, r := range res {
		if err := r.Error(); err != nil {
			return redisErr("write file data", err)
		}
	}
	if ok, _ := res[2].AsInt64(); ok != 1 {
		return fmt.Errorf("cannot write file data: the upload's claim expired: %w", ErrUnavailable)
	}
	return nil
}

// indexMember is f's entry in the owner's index: "<file id>:<size>". Ids have a fixed
// length, so entries sort by id.
func indexMember(id string, size int64) string {
	return id + ":" + strconv.FormatInt(size, 10)
}

// commitFile makes f visible and waits for the replicas. A PutFile that fails leaves nothing
// visible: when the replicas fall short it deletes f again, and when the commit's reply is
// lost (time-out, connection lost) the script may have run or still be on its way, so
// settleCommit learns which. What Redis cannot be told at once is left to ReclaimExpired.
func (s *Redis) commitFile(k *fileKeys, f *File, token string, chunks int) error {
	var exp int64
	if !f.Expires.IsZero() {
		exp = max(f.Expires.UnixMilli(), 1) // an expiry in the past removes the file at once
	}
	meta := appendFileMeta(make([]byte, 0, 64), f)
	res, err := s.eval("put file", commitScript, true,
		[]string{k.meta, k.data, k.index, k.claim, k.staging},
		token, rueidis.BinaryString(meta), strconv.FormatInt(exp, 10), indexMember(f.ID, f.Size), strconv.Itoa(chunks))
	if err != nil && replyLost(res) {
		return s.settleCommit(k, f.ID, token, err)
	}
	committed := false
	if res.Error() == nil {
		ok, _ := res.AsInt64()
		committed = ok == 1
	}
	switch {
	case committed && err != nil:
		// Committed, but not held by enough replicas: take it back.
		return s.takeBack(k, f.ID, token, err)
	case err != nil:
		return err
	case !committed:
		return fmt.Errorf("cannot put file %q: the upload's claim expired: %w", f.ID, ErrUnavailable)
	}
	return nil
}

// settleCommit follows a commit whose reply was lost (cerr) with settleScript, which
// tells whether the commit ran and stops one still on its way. A commit that ran and that
// the replicas confirm is a success; any other outcome fails with cerr, the file taken back.
func (s *Redis) settleCommit(k *fileKeys, id, token string, cerr error) error {
	res, err := s.eval("put file", settleScript, true, []string{k.meta, k.claim, k.staging}, token)
	ran := false
	if res.Error() == nil {
		ok, _ := res.AsInt64()
		ran = ok == 1
	}
	switch {
	case err == nil && ran:
		return nil
	case err == nil:
		return cerr // not committed, and no commit can come any more
	}
	return s.takeBack(k, id, token, errors.Join(cerr, err))
}

// takeBack removes an upload that fails with err, committed or not, with dropScript; when
// Redis does not confirm the removal, ReclaimExpired tries again.
func (s *Redis) takeBack(k *fileKeys, id, token string, err error) error {
	u := unsettledUpload{k: *k, id: id, token: token}
	if _, derr := s.drop(&u); derr != nil {
		s.dropLater(u)
		return errors.Join(err, derr)
	}
	return err
}

// unsettledUpload is an upload that failed and may still be there: its keys, id and token.
type unsettledUpload struct {
	k         fileKeys
	id, token string
}

// maxUnsettled bounds the uploads a Redis remembers for ReclaimExpired; beyond it the oldest
// is forgotten (and stays if it was committed).
const maxUnsettled = 4096

func (s *Redis) drop(u *unsettledUpload) (bool, error) {
	res, err := s.eval("take back file", dropScript, false,
		[]string{u.k.meta, u.k.data, u.k.index, u.k.claim, u.k.staging}, u.id, u.token)
	if err != nil {
		return false, err
	}
	n, _ := res.AsInt64()
	return n == 1, nil
}

func (s *Redis) dropLater(u unsettledUpload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unsettled) >= maxUnsettled {
		s.unsettled = slices.Delete(s.unsettled, 0, 1)
	}
	s.unsettled = append(s.unsettled, u)
}

// ReclaimExpired takes back the uploads that failed while Redis could not confirm their
// removal (see commitFile) and returns how many files it removed. Expired files need
// nothing: Redis removes a file's metadata and bytes by itself at its expiry, and listings
// prune the index entries left behind.
func (s *Redis) ReclaimExpired(time.Time) (int, error) {
	s.mu.Lock()
	todo := s.unsettled
	s.unsettled = nil
	s.mu.Unlock()
	n := 0
	for i := range todo {
		removed, err := s.drop(&todo[i])
		if err != nil {
			// Redis is likely out of reach: keep the rest for the next run.
			for _, u := range todo[i:] {
				s.dropLater(u)
			}
			return n, fmt.Errorf("cannot take back %d failed uploads: %w", len(todo)-i, err)
		}
		if removed {
			n++
		}
	}
	return n, nil
}

// GetFile returns the metadata of an unexpired file of owner, or ErrNotFound.
func (s *Redis) GetFile(owner, id string, now time.Time) (File, error) {
	return unexpiredFile(s.getFileMeta, owner, id, now)
}

// getFileMeta returns the metadata of owner's id, expired or not, or ErrNotFound.
func (s *Redis) getFileMeta(owner, id string) (File, error) {
	if !ValidFileID(id) {
		return File{}, ErrNotFound
	}
	ctx, cancel := s.ctx()
	defer cancel()
	k := s.fileKeys(owner, id)
	v, err := s.c.Do(ctx, s.c.B().Get().Key(k.meta).Build()).AsBytes()
	if rueidis.IsRedisNil(err) {
		return File{}, ErrNotFound
	}
	if err != nil {
		return File{}, redisErr("get file", err)
	}
	f := File{ID: id, Owner: owner}
	if err := decodeFileMeta(v, &f); err != nil {
		return File{}, fmt.Errorf("cannot get file %q: %w", id, err)
	}
	return f, nil
}

// AppendFileData appends the bytes of an unexpired file of owner to dst. Metadata and chunks
// are read by one script, so they come from one view.
func (s *Redis) AppendFileData(dst []byte, owner, id string, now time.Time) ([]byte, error) {
	if !ValidOwner(owner) {
		return dst, fmt.Errorf("cannot read file: owner %q: %w", owner, ErrInvalid)
	}
	if !ValidFileID(id) {
		return dst, ErrNotFound
	}
	k := s.fileKeys(owner, id)
	res, err := s.eval("read file", readScript, false, []string{k.meta, k.data})
	if err != nil {
		return dst, err
	}
	parts, err := res.ToArray()
	if rueidis.IsRedisNil(err) {
		return dst, ErrNotFound
	}
	if err != nil || len(parts) == 0 {
		return dst, fmt.Errorf("cannot read file %q: %w", id, errors.Join(errCorrupt, err))
	}
	return appendRedisChunks(dst, parts, owner, id, now)
}

// appendRedisChunks decodes the metadata in parts[0] and appends the chunks after it to dst,
// checking their total against the size.
func appendRedisChunks(dst []byte, parts []rueidis.RedisMessage, owner, id string, now time.Time) ([]byte, error) {
	meta, err := parts[0].AsBytes()
	f := File{ID: id, Owner: owner}
	if err == nil {
		err = decodeFileMeta(meta, &f)
	}
	if err != nil {
		return dst, fmt.Errorf("cannot read file %q: %w", id, err)
	}
	if f.Expired(now) {
		return dst, ErrNotFound
	}
	dst = slices.Grow(dst, int(f.Size))
	start := len(dst)
	for _, p := range parts[1:] {
		chunk, err := p.ToString()
		if err != nil {
			return dst[:start], fmt.Errorf("cannot read file %q: %w", id, err)
		}
		dst = append(dst, chunk...)
	}
	if n := int64(len(dst) - start); n != f.Size {
		return dst[:start], fmt.Errorf("cannot read file %q: %d bytes of %d: %w", id, n, f.Size, errCorrupt)
	}
	return dst, nil
}

// DeleteFile removes an unexpired file of owner, metadata, bytes and index entry in one
// script, acknowledged like a write, or returns ErrNotFound.
func (s *Redis) DeleteFile(owner, id string) error {
	if !ValidOwner(owner) {
		return fmt.Errorf("cannot delete file: owner %q: %w", owner, ErrInvalid)
	}
	f, err := s.getFileMeta(owner, id)
	if err != nil {
		return err
	}
	if f.Expired(s.opts.Now()) {
		return ErrNotFound
	}
	k := s.fileKeys(owner, id)
	res, err := s.eval("delete file", deleteScript, true, []string{k.meta, k.data, k.index}, id)
	gone := res.Error() == nil // the script returned the metadata it removed
	if gone {
		s.addStats(-1, -f.Size)
	}
	switch {
	case err != nil:
		return err
	case !gone:
		return ErrNotFound // deleted meanwhile
	}
	return nil
}
