package admin

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/keys"
)

var testModels = []string{"chat-model", "chat-mini", "image-model"}

func TestParseKeyInput(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, err := parseKeyInput([]byte(`{"id":"k-1","name":"x","models":["chat-*"],"limits":{"concurrent":2,"models":{"chat-mini":{"requests_per_minute":5}}},
		"expires_at":"2026-02-01T00:00:00+01:00","metadata":{"a":"b"}}`), true, testModels, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	var r keys.Record
	c.apply(&r)
	if c.id != "k-1" || r.Name != "x" || r.Limits.Concurrent != 2 || r.Limits.Models["chat-mini"].RequestsPerMinute != 5 ||
		r.ExpiresAt.Location() != time.UTC || r.Metadata["a"] != "b" {
		t.Fatalf("parsed: %+v %+v", c, r)
	}
	// null clears, absent keeps.
	c, err = parseKeyInput([]byte(`{"models":null}`), false, testModels, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	r.Models = []string{"x"}
	c.apply(&r)
	if r.Models != nil || r.Name != "x" {
		t.Fatalf("after a clear: %+v", r)
	}
	f := func(body, field string) {
		t.Helper()
		_, err := parseKeyInput([]byte(body), true, testModels, nil, now)
		var fe *fieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Fatalf("%s: %v, want a problem of %s", body, err, field)
		}
	}
	f(`[]`, "body")
	f(`{"models":[""]}`, "models[0]")
	f(`{"models":["chat-model", 3]}`, "models[1]")
	f(`{"metadata":{"k":"\u0001"}}`, "metadata.k")
	f(`{"metadata":{"k":5}}`, "metadata.k")
	f(`{"limits":{"models":{"chat-model":{"tokens_per_minute":-5}}}}`, "limits.models.chat-model.tokens_per_minute")
	f(`{"expires_at":"2040-01-01T00:00:00Z"}`, "expires_at")
	f(`{"name":"`+strings.Repeat("x", MaxNameLen+1)+`"}`, "name")
}

func TestParseOverlap(t *testing.T) {
	for body, want := range map[string]time.Duration{``: 0, `{}`: 0, `{"overlap":"10m"}`: 10 * time.Minute, `{"overlap":"168h"}`: MaxOverlap} {
		if d, err := parseOverlap([]byte(body)); err != nil || d != want {
			t.Fatalf("%s: %v %v", body, d, err)
		}
	}
	for _, body := range []string{`{"overlap":"87600h"}`, `{"overlap":"soon"}`, `{"overlap":5}`, `{"overlap":"1m","x":1}`} {
		if _, err := parseOverlap([]byte(body)); err == nil {
			t.Fatalf("%s: accepted", body)
		}
	}
}

func TestTokens(t *testing.T) {
	ts := NewTokens([]config.AdminToken{{ID: "ops", Key: "ops-token-0123456789"}, {ID: "ci", SHA256: keys.DigestOf("ci-token-0123456789")}})
	f := func(auth, want string) {
		t.Helper()
		id, ok := ts.Verify([]byte(auth))
		if id != want || ok != (want != "") {
			t.Fatalf("%q: %q %v, want %q", auth, id, ok, want)
		}
	}
	f("Bearer ops-token-0123456789", "ops")
	f("bearer ci-token-0123456789", "ci")
	f("Bearer nope", "")
	f("ops-token-0123456789", "")
	f("", "")
	if (*Tokens)(nil).Len() != 0 {
		t.Fatal("nil tokens")
	}
}

// FuzzParseKeyInput: any body is accepted or refused with a field, never a panic, and an
// accepted one makes a record that encodes and decodes back.
func FuzzParseKeyInput(f *testing.F) {
	for _, s := range []string{`{}`, `{"name":"x","models":["chat-*"]}`, `{"limits":{"concurrent":1}}`, `{"metadata":{"a":"b"}}`, `{"id":"a{"}`} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := parseKeyInput(body, true, testModels, nil, now)
		if err != nil {
			var fe *fieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("a refusal without a field: %v", err)
			}
			return
		}
		r := keys.Record{ID: "k", Digest: keys.DigestOf("s")}
		c.apply(&r)
		if _, err := keys.Decode("k", r.Encode()); err != nil {
			t.Fatal(err)
		}
	})
}
