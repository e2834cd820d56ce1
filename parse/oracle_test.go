package parse

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// This file holds the encoding/json oracles that the table tests and the fuzz targets share.

// peekWant is what Peek must report for a body; nil pointers are absent values.
type peekWant struct {
	model, session, previous *string
	stream, hasSession       bool
}

// decodeObject decodes a JSON object with encoding/json, keeping numbers as written.
func decodeObject(body []byte) (map[string]any, error) {
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// peekOracle derives from encoding/json what Peek must return for body, which must be valid
// JSON: the fields, or the sentinel error.
func peekOracle(body []byte) (peekWant, error) {
	if i := skipWS(body, 0); i >= len(body) || body[i] != '{' {
		return peekWant{}, ErrNotObject
	}
	m, err := decodeObject(body)
	if err != nil {
		return peekWant{}, err
	}
	if err := duplicateOracle(body); err != nil {
		return peekWant{}, err
	}
	var w peekWant
	var ok bool
	if w.model, ok = oracleString(m, "model", false); !ok {
		return peekWant{}, ErrModelType
	}
	if w.session, ok = oracleString(m, "session_id", true); !ok {
		return peekWant{}, ErrSessionIDType
	}
	if w.previous, ok = oracleString(m, "previous_response_id", true); !ok {
		return peekWant{}, ErrPreviousResponseIDType
	}
	w.stream = m["stream"] == true
	_, w.hasSession = m["session_id"]
	return w, nil
}

func oracleString(m map[string]any, key string, nullable bool) (*string, bool) {
	v, present := m[key]
	if !present || (nullable && v == nil) {
		return nil, true
	}
	s, ok := v.(string)
	return &s, ok
}

// asDecoded turns bytes Peek returned into what encoding/json makes of them: it replaces each
// byte of invalid UTF-8 with U+FFFD, as encoding/json does and Peek does not.
func asDecoded(b []byte) string { return string([]rune(string(b))) }

// checkPeekAgainstOracle checks Peek's result for a valid JSON body against encoding/json.
func checkPeekAgainstOracle(t *testing.T, body []byte) {
	t.Helper()
	var f Fields
	err := Peek(body, &f)
	want, wantErr := peekOracle(body)
	if wantErr != nil {
		if !errors.Is(err, wantErr) {
			t.Fatalf("Peek(%q) error = %v; encoding/json says %v", body, err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("Peek(%q) error = %v; encoding/json decodes it", body, err)
	}
	checkField(t, body, "model", f.Model, want.model)
	checkField(t, body, "session_id", f.SessionID, want.session)
	checkField(t, body, "previous_response_id", f.PreviousResponseID, want.previous)
	if f.Stream != want.stream {
		t.Fatalf("Peek(%q).Stream = %v; encoding/json says %v", body, f.Stream, want.stream)
	}
	if f.HasSessionID() != want.hasSession {
		t.Fatalf("Peek(%q).HasSessionID() = %v; encoding/json says %v", body, f.HasSessionID(), want.hasSession)
	}
	checkOtherReaders(t, body, &f)
}

func checkField(t *testing.T, body []byte, name string, got []byte, want *string) {
	t.Helper()
	switch {
	case want == nil && got != nil:
		t.Fatalf("Peek(%q): %s = %q; want absent", body, name, got)
	case want != nil && got == nil:
		t.Fatalf("Peek(%q): %s absent; want %q", body, name, *want)
	case want != nil && asDecoded(got) != *want:
		t.Fatalf("Peek(%q): %s = %q; encoding/json says %q", body, name, got, *want)
	}
}

// checkSplice checks that out is valid JSON that decodes to body's object minus session_id.
func checkSplice(t *testing.T, body, out []byte) {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("splice of %q gave invalid JSON %q", body, out)
	}
	in, err := decodeObject(body)
	if err != nil {
		t.Fatalf("cannot decode body %q: %s", body, err)
	}
	got, err := decodeObject(out)
	if err != nil {
		t.Fatalf("cannot decode splice %q: %s", out, err)
	}
	delete(in, "session_id")
	if !reflect.DeepEqual(in, got) {
		t.Fatalf("splice of %q = %q decodes to %v; want %v", body, out, got, in)
	}
}

// readKeys are the top-level keys that Peek refuses to see twice.
var readKeys = []string{"model", "session_id", "previous_response_id", "stream", "store", "prompt", "stream_options"}

// topLevel returns the decoded top-level members of a valid JSON object in body order.
func topLevel(body []byte) (keys []string, values []json.RawMessage) {
	d := json.NewDecoder(bytes.NewReader(body))
	if _, err := d.Token(); err != nil {
		panic(err)
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			panic(err)
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			panic(err)
		}
		keys, values = append(keys, k.(string)), append(values, v)
	}
	return keys, values
}

// undelimited drops underscores and dashes, as encoding/json/v2 does when it matches names
// case-insensitively.
func undelimited(s string) []byte {
	return []byte(strings.NewReplacer("_", "", "-", "").Replace(s))
}

// duplicateOracle returns ErrDuplicateField when a key Peek reads appears twice or as a case
// variant, matching keys as loosely as encoding/json (bytes.EqualFold on the decoded key) or
// encoding/json/v2 (also ignoring underscores and dashes) does.
func duplicateOracle(body []byte) error {
	keys, values := topLevel(body)
	for _, name := range readKeys {
		if looseCount(keys, name) {
			return ErrDuplicateField
		}
	}
	// stream_options (once, exactly spelled by now) holds include_usage, which is read too
	for i, k := range keys {
		if k == "stream_options" && bytes.HasPrefix(values[i], []byte("{")) {
			inner, _ := topLevel(values[i])
			if looseCount(inner, "include_usage") {
				return ErrDuplicateField
			}
		}
	}
	return nil
}

// looseCount reports whether name appears more than once in keys, or only as a case variant.
func looseCount(keys []string, name string) bool {
	n, exact := 0, true
	for _, k := range keys {
		if bytes.EqualFold(undelimited(k), undelimited(name)) {
			n, exact = n+1, exact && k == name
		}
	}
	return n > 1 || !exact
}

// caseInsensitive is how a Go provider decodes a body: encoding/json matches these tags
// without regard to case, and the last matching member wins.
type caseInsensitive struct {
	Model              *string `json:"model"`
	SessionID          *string `json:"session_id"`
	PreviousResponseID *string `json:"previous_response_id"`
	Stream             any     `json:"stream"`
}

// checkOtherReaders checks that, for a body Peek accepted, a case-insensitive struct decoder
// and a reader that takes the first member of each key see what Peek saw.
func checkOtherReaders(t *testing.T, body []byte, f *Fields) {
	t.Helper()
	var ci caseInsensitive
	if err := json.Unmarshal(body, &ci); err != nil {
		t.Fatalf("Peek accepted %q; encoding/json into a struct: %v", body, err)
	}
	checkField(t, body, "model (struct)", f.Model, ci.Model)
	checkField(t, body, "session_id (struct)", f.SessionID, ci.SessionID)
	checkField(t, body, "previous_response_id (struct)", f.PreviousResponseID, ci.PreviousResponseID)
	if f.Stream != (ci.Stream == true) {
		t.Fatalf("Peek(%q).Stream = %v; struct decoder says %v", body, f.Stream, ci.Stream)
	}
	keys, values := topLevel(body)
	first := map[string]json.RawMessage{}
	for i, k := range keys {
		if _, ok := first[k]; !ok {
			first[k] = values[i]
		}
	}
	if f.Stream != (string(first["stream"]) == "true") {
		t.Fatalf("Peek(%q).Stream = %v; the first stream member is %s", body, f.Stream, first["stream"])
	}
	for name, got := range map[string][]byte{"model": f.Model, "previous_response_id": f.PreviousResponseID} {
		var s *string
		if v, ok := first[name]; ok && string(v) != "null" {
			s = new(string)
			_ = json.Unmarshal(v, s)
		}
		checkField(t, body, name+" (first member)", got, s)
	}
}
