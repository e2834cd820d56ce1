package proxy

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
)

func TestHashedKeys(t *testing.T) {
	keys := NewHashedKeys([]config.Key{{ID: "a", Key: "key-a"}, {ID: "b", SHA256: HashKey("key-b")}})
	f := func(key, wantID string, wantOK bool) {
		t.Helper()
		id, ok := keys.Verify([]byte(key))
		if id != wantID || ok != wantOK {
			t.Fatalf("Verify(%q) = %q, %v; want %q, %v", key, id, ok, wantID, wantOK)
		}
	}
	f("key-a", "a", true)
	f("key-b", "b", true)
	f("key-c", "", false)
	f("", "", false)
	f("key-a ", "", false)
}

// BenchmarkCredential shows what credential, which scans the whole header to
// find a second copy, costs against Peek, which stops at the first, on a
// request with the twelve headers an SDK sends.
func BenchmarkCredential(b *testing.B) {
	var h fasthttp.RequestHeader
	for _, kv := range [][2]string{
		{"User-Agent", "OpenAI/Go 3.8.1"}, {"Accept", "application/json"},
		{"Authorization", "Bearer sk-0123456789abcdef"}, {"Content-Type", "application/json"},
		{"X-Stainless-Arch", "x64"}, {"X-Stainless-Lang", "go"}, {"X-Stainless-Os", "Linux"},
		{"X-Stainless-Package-Version", "3.8.1"}, {"X-Stainless-Retry-Count", "0"},
		{"X-Stainless-Runtime", "go"}, {"X-Stainless-Runtime-Version", "go1.26"}, {"Accept-Encoding", "gzip"},
	} {
		h.Add(kv[0], kv[1])
	}
	b.Run("peek", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if len(h.Peek(fasthttp.HeaderAuthorization)) == 0 {
				b.Fatal("no Authorization")
			}
		}
	})
	b.Run("credential", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if v, twice := credential(&h, fasthttp.HeaderAuthorization); len(v) == 0 || twice {
				b.Fatal("no single Authorization")
			}
		}
	})
}
