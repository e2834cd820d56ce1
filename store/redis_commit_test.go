package store

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// TestRedisCommitReplyLost loses the reply of an upload's commit script (it runs, the client
// hears a time-out) and, in some cases, the follow-up calls too. An upload the client is
// told failed must never be listed, at once or after ReclaimExpired; one it is told
// succeeded must be listed and readable.
func TestRedisCommitReplyLost(t *testing.T) {
	e, s := openRedisEnv(t, nil)
	f := func(name string, faults map[*luaScript]evalFault, wantErr bool, leftover int) {
		t.Helper()
		owner := "lost-" + name
		s.testFault = func(sc *luaScript) evalFault { return faults[sc] }
		file := newFile(owner, name)
		file.ID = NewFileID(t0)
		data := testData(5, 3000)
		n0, b0 := s.FileStats()
		_, err := s.PutFile(file, bytes.NewReader(data), 1<<20)
		s.testFault = nil
		if wantErr != (err != nil) {
			t.Fatalf("%s: PutFile error %v, want an error: %v", name, err, wantErr)
		}
		if err != nil && !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s: PutFile error %v, want ErrUnavailable", name, err)
		}
		listed := func() bool {
			files, _, err := s.ListFiles(owner, ListQuery{Now: t0, Limit: 10})
			if err != nil {
				t.Fatalf("%s: ListFiles: %v", name, err)
			}
			return slices.ContainsFunc(files, func(g File) bool { return g.ID == file.ID })
		}
		if err == nil {
			got, rerr := s.AppendFileData(nil, owner, file.ID, t0)
			if rerr != nil || !bytes.Equal(got, data) || !listed() {
				t.Fatalf("%s: acknowledged upload: read %d bytes, %v; listed %v", name, len(got), rerr, listed())
			}
			if n, b := s.FileStats(); n != n0+1 || b != b0+int64(len(data)) {
				t.Fatalf("%s: FileStats %d, %d; want %d, %d", name, n, b, n0+1, b0+int64(len(data)))
			}
			return
		}
		// A failed upload whose removal Redis could not confirm is left to ReclaimExpired.
		if n, err := s.ReclaimExpired(t0); err != nil || n != leftover {
			t.Fatalf("%s: ReclaimExpired = %d, %v; want %d, nil", name, n, err, leftover)
		}
		if listed() {
			t.Fatalf("%s: the failed upload is listed", name)
		}
		if keys := e.fileKeys(s, owner, file.ID); len(keys) != 0 {
			t.Fatalf("%s: the failed upload left %q", name, keys)
		}
		if n, b := s.FileStats(); n != n0 || b != b0 {
			t.Fatalf("%s: FileStats %d, %d; want %d, %d", name, n, b, n0, b0)
		}
	}
	// The commit ran and the follow-up learns it: the upload succeeded.
	f("settled", map[*luaScript]evalFault{commitScript: faultLostReply}, false, 0)
	// The commit never reached Redis: the follow-up fences it and removes the staging.
	f("unsent", map[*luaScript]evalFault{commitScript: faultUnsent}, true, 0)
	// The follow-up is lost too: the upload is removed.
	f("unsettled", map[*luaScript]evalFault{commitScript: faultLostReply, settleScript: faultUnsent}, true, 0)
	// Nothing after the commit reaches Redis: ReclaimExpired removes the file later.
	f("unreachable", map[*luaScript]evalFault{commitScript: faultLostReply, settleScript: faultUnsent, dropScript: faultUnsent}, true, 1)
	f("unreachable-lost", map[*luaScript]evalFault{commitScript: faultLostReply, settleScript: faultLostReply, dropScript: faultLostReply}, true, 0)
}
