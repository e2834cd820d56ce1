package parse

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestAppendUnescaped(t *testing.T) {
	f := func(raw, want string) {
		t.Helper()
		got, err := AppendUnescaped([]byte("pre"), []byte(raw))
		if err != nil || string(got) != "pre"+want {
			t.Fatalf("AppendUnescaped(%q) = %q, %v; want %q", raw, got, err, "pre"+want)
		}
		v, err := StringValue(make([]byte, 0, 64), []byte(raw))
		if err != nil || string(v) != want {
			t.Fatalf("StringValue(%q) = %q, %v; want %q", raw, v, err, want)
		}
		var s string
		if err := json.Unmarshal([]byte(raw), &s); err != nil || s != want {
			t.Fatalf("BUG in test: encoding/json decodes %q to %q, %v", raw, s, err)
		}
	}
	f(`""`, "")
	f(`"plain"`, "plain")
	f(`"a\"b\\c\/d"`, `a"b\c/d`)
	f(`"\b\f\n\r\t"`, "\b\f\n\r\t")
	f(`"\u0041\u00e9\u4e2d\uFFFF"`, "Aé中\uffff")
	f(`"\ud83d\ude00"`, "😀")
	f(`"\ud83dx"`, "\ufffdx")
	f(`"\ude00\ud83d"`, "\ufffd\ufffd")
	f(`"\ud83d\u0041"`, "\ufffdA")
	f(`"\ud83d\ud83d\ude00"`, "\ufffd😀")
	f(`"模型"`, "模型")

	for _, raw := range []string{``, `"`, `x`, `"a`, `"a"b`, `"a" `, ` "a"`, `"\x"`, `"\u12"`, `"\uZZZZ"`, "\"\n\"", `'a'`} {
		if _, err := AppendUnescaped(nil, []byte(raw)); !errors.Is(err, ErrSyntax) {
			t.Fatalf("AppendUnescaped(%q) error = %v; want ErrSyntax", raw, err)
		}
		if _, err := StringValue(nil, []byte(raw)); !errors.Is(err, ErrSyntax) {
			t.Fatalf("StringValue(%q) error = %v; want ErrSyntax", raw, err)
		}
	}
}

func TestStringValueAliasing(t *testing.T) {
	raw := []byte(`"resp_abc"`)
	v, err := StringValue(nil, raw)
	if err != nil || &v[0] != &raw[1] || len(v) != 8 {
		t.Fatalf("StringValue without escapes must return the inner bytes: %q %v", v, err)
	}
	dst := make([]byte, 3, 64)
	v, err = StringValue(dst, []byte(`"a\nb"`))
	if err != nil || string(v) != "a\nb" || &v[0] != &dst[:4][3] {
		t.Fatalf("StringValue with escapes must append to dst: %q %v", v, err)
	}
}
