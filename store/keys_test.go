package store

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

func TestSortableNanosOrder(t *testing.T) {
	times := []time.Time{
		{}, // the zero time sorts first
		time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(-1, 0),
		time.Unix(0, -1),
		time.Unix(0, 0),
		time.Unix(0, 1),
		t0,
		t0.Add(time.Nanosecond),
		time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for i := 1; i < len(times); i++ {
		a, b := sortableNanos(times[i-1]), sortableNanos(times[i])
		ka := binary.BigEndian.AppendUint64(nil, a)
		kb := binary.BigEndian.AppendUint64(nil, b)
		// Times out of the int64 nanosecond range clamp to the ends, so they may tie.
		clamped := i == 1
		if c := bytes.Compare(ka, kb); c > 0 || (c == 0 && !clamped) {
			t.Fatalf("key of %v does not sort before key of %v", times[i-1], times[i])
		}
	}
}

func TestKeysParseBack(t *testing.T) {
	id := NewFileID(t0)
	for _, owner := range []string{"a", "team-a", "with space/and\xffbytes"} {
		k := binary.BigEndian.AppendUint32(appendChunkPrefix(nil, owner, id), 7)
		o, i, ok := parseChunkKey(k)
		if !ok || string(o) != owner || string(i) != id {
			t.Fatalf("parseChunkKey(%q) = %q, %q, %v", k, o, i, ok)
		}
		k = appendExpiryKey(nil, t0, owner, id)
		exp, o, i, ok := parseExpiryKey(k)
		if !ok || exp != sortableNanos(t0) || string(o) != owner || string(i) != id {
			t.Fatalf("parseExpiryKey(%q) = %d, %q, %q, %v", k, exp, o, i, ok)
		}
	}
	k := appendResponseAgeKey(nil, t0, "resp_1")
	if c, id, ok := parseResponseAgeKey(k); !ok || c != sortableNanos(t0) || string(id) != "resp_1" {
		t.Fatalf("parseResponseAgeKey(%q) = %d, %q, %v", k, c, id, ok)
	}
	for _, bad := range []string{"", "d/", "d/" + id, "x/12345678" + id, "t/1234"} {
		if _, _, ok := parseChunkKey([]byte(bad)); ok {
			t.Fatalf("parseChunkKey accepted %q", bad)
		}
		if _, _, _, ok := parseExpiryKey([]byte(bad)); ok {
			t.Fatalf("parseExpiryKey accepted %q", bad)
		}
		if _, _, ok := parseResponseAgeKey([]byte(bad)); ok {
			t.Fatalf("parseResponseAgeKey accepted %q", bad)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	f := func(prefix, want string) {
		t.Helper()
		if got := prefixEnd([]byte(prefix)); string(got) != want {
			t.Fatalf("prefixEnd(%q) = %q, want %q", prefix, got, want)
		}
	}
	f("f/a\x00", "f/a\x01")
	f("d/", "d0")
	f("a\xff", "b")
	f("a\xff\xff", "b")
	f("\xff\xff", "")
	f("", "")
}

// TestReclaimKeepsRecreatedFile runs a reclaim group over an expiry key that no longer matches
// the file (the file was deleted and uploaded again under the same id with a later expiry
// while a reclaim was scanning): the file stays and only the stale key goes.
func TestReclaimKeepsRecreatedFile(t *testing.T) {
	p := newMemEnv(t, PebbleOptions{}).open()
	f := newFile("team-a", "again.png")
	f.ID = NewFileID(t0)
	f.Expires = t0.Add(48 * time.Hour)
	putFile(t, p, f, []byte("new bytes"))
	stale := appendExpiryKey(nil, t0.Add(time.Hour), f.Owner, f.ID)
	b := p.db.NewBatch()
	b.Set(stale, nil, nil)
	if err := b.Commit(nil); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if n, err := p.reclaimFileGroup([][]byte{stale}); err != nil || n != 0 {
		t.Fatalf("reclaimFileGroup = %d, %v; want 0, nil", n, err)
	}
	data, err := p.AppendFileData(nil, f.Owner, f.ID, t0)
	if err != nil || string(data) != "new bytes" {
		t.Fatalf("recreated file lost: %q, %v", data, err)
	}
	if keys := p.rawKeys(t, prefixFileExpiry); len(keys) != 1 {
		t.Fatalf("expiry keys %q; want only the file's own", keys)
	}
}
