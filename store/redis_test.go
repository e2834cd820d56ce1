package store

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// The Redis engine's own tests: what the conformance suite cannot say for both engines
// (native expiry, replica acknowledgement, options). They use the test cluster.

// openRedisEnv returns a Redis environment with opts applied over the test defaults.
func openRedisEnv(t *testing.T, edit func(o *RedisOptions)) (*redisEnv, *Redis) {
	t.Helper()
	e := newRedisEnv(t, envOptions{}).(*redisEnv)
	if edit != nil {
		edit(&e.opts)
	}
	return e, e.open().(*Redis)
}

// eventually polls cond until it holds; it fails the test after a deadline generous enough
// for a loaded machine. Only what Redis does by itself (expiry) is waited for.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 60s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRedisNativeExpiry(t *testing.T) {
	e, s := openRedisEnv(t, func(o *RedisOptions) {
		o.ResponseTTL = 200 * time.Millisecond
		o.UploadTTL = 200 * time.Millisecond
		o.ChunkSize = testChunk
	})
	if err := s.PutResponse(Response{ID: "resp_ttl", Owner: "o", Model: "m", Deployment: "d", Created: t0}); err != nil {
		t.Fatal(err)
	}
	keep := putFile(t, s, File{Owner: "team-a", Filename: "keep"}, testData(1, 3000))
	f := newFile("team-a", "short")
	f.Created, f.Expires = time.Now(), time.Now().Add(200*time.Millisecond)
	short := putFile(t, s, f, testData(2, 5000))
	// A crashed upload: its claim and chunks are written, the commit never comes.
	crashed := NewFileID(time.Now())
	crashedUpload(t, s.beginUpload, s.opts.ChunkSize, "team-a", crashed, testData(3, 4000))
	if keys := e.fileKeys(s, "team-a", crashed); len(keys) != 2 {
		t.Fatalf("crashed upload keys %q; want its claim and chunks", keys)
	}
	if _, _, err := s.ListFiles("team-a", ListQuery{IDs: []string{crashed}}); err != nil {
		t.Fatal(err)
	}

	// The zero time as "now" hides nothing: only Redis' own expiry removes these.
	never := time.Time{}
	eventually(t, "response expiry", func() bool { _, err := s.GetResponse("resp_ttl"); return errors.Is(err, ErrNotFound) })
	eventually(t, "file expiry", func() bool { _, err := s.GetFile("team-a", short.ID, never); return errors.Is(err, ErrNotFound) })
	eventually(t, "crashed upload expiry", func() bool { return len(e.fileKeys(s, "team-a", crashed)) == 0 })
	_, err := s.AppendFileData(nil, "team-a", short.ID, never)
	wantNotFound(t, "AppendFileData(expired)", err)
	if keys := e.fileKeys(s, "team-a", short.ID); len(keys) != 1 {
		t.Fatalf("expired file keys %q; want only its index entry", keys)
	}
	if n, b := s.FileStats(); n != 2 || b != 8000 {
		t.Fatalf("FileStats before a listing = %d, %d; want 2, 8000", n, b)
	}
	files, more, err := s.ListFiles("team-a", ListQuery{Now: never, Limit: 10})
	if err != nil || more || len(files) != 1 || files[0].ID != keep.ID {
		t.Fatalf("ListFiles after expiry = %+v, %v, %v; want only the kept file", files, more, err)
	}
	if keys := e.fileKeys(s, "team-a", short.ID); len(keys) != 0 {
		t.Fatalf("listing left the expired file's entry: %q", keys)
	}
	if n, b := s.FileStats(); n != 1 || b != 3000 {
		t.Fatalf("FileStats after the listing pruned = %d, %d; want 1, 3000", n, b)
	}
	// The crashed upload's id is free again.
	f = newFile("team-a", "retry")
	f.ID = crashed
	putFile(t, s, f, []byte("retry"))
}

// TestRedisShortOfReplicas asks for more replicas than the cluster has: every write fails
// with ErrUnavailable and leaves nothing visible, and reads go on.
func TestRedisShortOfReplicas(t *testing.T) {
	e, s := openRedisEnv(t, func(o *RedisOptions) {
		o.Replicas = 2 // each master of the test cluster has one
		o.WaitTimeout = 50 * time.Millisecond
	})
	r := Response{ID: "resp_short", Owner: "o", Model: "m", Deployment: "d", Created: t0}
	if err := s.PutResponse(r); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("PutResponse error %v, want ErrUnavailable", err)
	}
	f := newFile("team-a", "x")
	f.ID = NewFileID(t0)
	if _, err := s.PutFile(f, bytes.NewReader(testData(1, 1000)), 1<<20); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("PutFile error %v, want ErrUnavailable", err)
	}
	if keys := e.fileKeys(s, "team-a", f.ID); len(keys) != 0 {
		t.Fatalf("unacknowledged upload left %q", keys)
	}
	if _, err := s.GetFile("team-a", f.ID, t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetFile error %v, want ErrNotFound", err)
	}
	// Replicas: 1 on the same data acknowledges.
	e.opts.Replicas = 1
	s1 := e.open()
	if err := s1.PutResponse(r); err != nil {
		t.Fatalf("PutResponse with one replica: %v", err)
	}
	if _, err := s.GetResponse(r.ID); err != nil {
		t.Fatalf("GetResponse through the first store: %v", err)
	}
}

func TestRedisUnreachable(t *testing.T) {
	_, err := OpenRedis(RedisOptions{Addrs: []string{"127.0.0.1:1"}, DialTimeout: time.Second})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("OpenRedis(closed port) error %v, want ErrUnavailable", err)
	}
}

func TestRedisOptionsValidate(t *testing.T) {
	f := func(name string, edit func(o *RedisOptions), field string) {
		t.Helper()
		o := RedisOptions{Addrs: []string{"127.0.0.1:7001"}}
		edit(&o)
		o.EnsureDefaults()
		err := o.Validate()
		if field == "" {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Fatalf("%s: error %v, want one naming %s", name, err, field)
		}
	}
	f("defaults", func(o *RedisOptions) {}, "")
	f("no addrs", func(o *RedisOptions) { o.Addrs = nil }, "Addrs")
	f("no port", func(o *RedisOptions) { o.Addrs = []string{"localhost"} }, "Addrs")
	f("brace in prefix", func(o *RedisOptions) { o.KeyPrefix = "gw{1}" }, "KeyPrefix")
	f("negative replicas", func(o *RedisOptions) { o.Replicas = -1 }, "Replicas")
	f("negative timeout", func(o *RedisOptions) { o.CommandTimeout = -time.Second }, "CommandTimeout")
	f("tiny chunks", func(o *RedisOptions) { o.ChunkSize = 1 }, "ChunkSize")
}

func TestOwnerTagHasNoBrace(t *testing.T) {
	for _, owner := range []string{"team-a", "{x}", "}{", "\xff\x7b\x7d"} {
		tag := ownerTag(owner)
		if strings.ContainsAny(tag[1:len(tag)-1], "{}") || tag[0] != '{' || tag[len(tag)-1] != '}' {
			t.Fatalf("ownerTag(%q) = %q", owner, tag)
		}
	}
	if ownerTag("a") == ownerTag("b") {
		t.Fatal("two owners share a tag")
	}
}
