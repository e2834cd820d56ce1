package proxy

import (
	"testing"

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
