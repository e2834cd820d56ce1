package parse

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"unicode/utf8"
)

// The seed corpora are under testdata/fuzz/<FuzzName>/.

// FuzzPeek checks Peek against encoding/json: it never accepts invalid JSON, never calls
// valid JSON a syntax error, and agrees on the fields and on type errors.
func FuzzPeek(f *testing.F) {
	f.Add([]byte(chatBody))
	for _, d := range dupBodies {
		f.Add([]byte(d.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fl Fields
		err := Peek(body, &fl)
		valid := json.Valid(body)
		if err == nil && !valid {
			t.Fatalf("Peek accepts invalid JSON %q", body)
		}
		if errors.Is(err, ErrSyntax) && valid {
			t.Fatalf("Peek(%q) = %v for valid JSON", body, err)
		}
		if valid {
			checkPeekAgainstOracle(t, body)
		}
		if err == nil {
			checkStoreAndPrompt(t, body, &fl)
		}
	})
}

// checkStoreAndPrompt checks the store and prompt that Peek found in its one pass against a
// second reading of the body by Member.
func checkStoreAndPrompt(t *testing.T, body []byte, fl *Fields) {
	t.Helper()
	if want := Member(body, "prompt"); !bytes.Equal(fl.RawPrompt, want) || (fl.RawPrompt == nil) != (want == nil) {
		t.Fatalf("Peek(%q).RawPrompt = %q; Member reads %q", body, fl.RawPrompt, want)
	}
	if want := string(Member(body, "store")) == "false"; fl.NoStore != want {
		t.Fatalf("Peek(%q).NoStore = %v; Member reads %v", body, fl.NoStore, want)
	}
}

// FuzzSplice checks that the splice gives valid JSON that decodes to the body minus
// session_id, and that what it cuts out is only session_id members, commas and whitespace.
func FuzzSplice(f *testing.F) {
	f.Add([]byte(chatBody))
	for _, d := range dupBodies {
		f.Add([]byte(d.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fl Fields
		if Peek(body, &fl) != nil {
			return
		}
		out := AppendWithoutSessionID(nil, body, &fl)
		if !fl.HasSessionID() {
			if !bytes.Equal(out, body) {
				t.Fatalf("splice changed %q without session_id into %q", body, out)
			}
			return
		}
		checkSplice(t, body, out)
		checkCuts(t, body, fl.cuts)
		var after Fields
		if err := Peek(out, &after); err != nil || after.HasSessionID() ||
			!bytes.Equal(after.Model, fl.Model) || after.Stream != fl.Stream ||
			!bytes.Equal(after.PreviousResponseID, fl.PreviousResponseID) {
			t.Fatalf("Peek of the splice %q of %q: %v %+v", out, body, err, after)
		}
	})
}

// checkCuts checks with encoding/json that each cut holds whole session_id members, the
// commas between them and one more comma, and whitespace; and that the cuts hold all of them.
func checkCuts(t *testing.T, body []byte, cuts []span) {
	t.Helper()
	members := 0
	for _, c := range cuts {
		frag := bytes.TrimSpace(body[c.start:c.end])
		switch {
		case bytes.HasPrefix(frag, []byte(",")):
			frag = frag[1:]
		case bytes.HasSuffix(frag, []byte(",")):
			frag = frag[:len(frag)-1]
		}
		keys := topLevelKeys(t, append(append([]byte("{"), frag...), '}'))
		for _, k := range keys {
			if k != "session_id" {
				t.Fatalf("the splice of %q cuts %q, which holds %q", body, body[c.start:c.end], k)
			}
		}
		members += len(keys)
	}
	if want := topLevelKeys(t, body); members != countOf(want, "session_id") {
		t.Fatalf("the splice of %q cuts %d session_id members; it has %d", body, members, countOf(want, "session_id"))
	}
}

// topLevelKeys lists the keys of a JSON object in order, duplicates included.
func topLevelKeys(t *testing.T, obj []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %q: %v", obj, err)
	}
	var keys []string
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			t.Fatalf("bad object %q: %v", obj, err)
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			t.Fatalf("bad object %q: %v", obj, err)
		}
	}
	if _, err := d.Token(); err != nil {
		t.Fatalf("bad object %q: %v", obj, err)
	}
	return keys
}

func countOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// FuzzScanner checks that a stream split at random points gives the same events, and the
// same error, as the whole stream, and that the events are those of the reference parser.
func FuzzScanner(f *testing.F) {
	f.Add([]byte(sseStream), uint64(1), uint16(0))
	f.Fuzz(func(t *testing.T, stream []byte, seed uint64, limit uint16) {
		maxEvent := int(limit)%2048 + 1
		whole, errWhole := scanChunks(NewScanner(maxEvent), [][]byte{stream})
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		cuts := make([]int, rng.IntN(min(len(stream), 64)+1))
		for i := range cuts {
			cuts[i] = rng.IntN(len(stream) + 1)
		}
		slices.Sort(cuts)
		split, errSplit := scanChunks(NewScanner(maxEvent), splitAt(stream, cuts...))
		if !sameEvents(whole, split) || !errors.Is(errSplit, errWhole) || (errWhole == nil) != (errSplit == nil) {
			t.Fatalf("stream %q\nwhole: %q, %v\ncut at %v: %q, %v", stream, whole, errWhole, cuts, split, errSplit)
		}
		unlimited, err := scanChunks(NewScanner(1<<30), splitAt(stream, cuts...))
		if ref := referenceEvents(string(stream)); err != nil || !sameEvents(unlimited, ref) {
			t.Fatalf("stream %q: %q, %v; the reference parser gives %q", stream, unlimited, err, ref)
		}
		if errWhole != nil && (len(whole) > len(unlimited) || !sameEvents(whole, unlimited[:len(whole)])) {
			t.Fatalf("stream %q: events before the limit error %q are not the first of %q", stream, whole, unlimited)
		}
	})
}

// FuzzMember checks Member against encoding/json's map[string]json.RawMessage and that it
// never panics on any input.
func FuzzMember(f *testing.F) {
	f.Add([]byte(`{"type":"response.created","response":{"id":"resp_1"}}`), "response")
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		got := Member(obj, key)
		if got != nil && !bytes.Contains(obj, got) {
			t.Fatalf("Member(%q, %q) = %q, not a part of obj", obj, key, got)
		}
		if i := skipWS(obj, 0); !utf8.Valid(obj) || !json.Valid(obj) || i == len(obj) || obj[i] != '{' {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(obj, &m); err != nil {
			t.Fatalf("cannot decode %q: %v", obj, err)
		}
		want, ok := m[key]
		if ok != (got != nil) || !bytes.Equal(got, want) {
			t.Fatalf("Member(%q, %q) = %q; encoding/json says %q", obj, key, got, want)
		}
	})
}

// FuzzUnescape checks AppendUnescaped and StringValue against encoding/json.
func FuzzUnescape(f *testing.F) {
	f.Add([]byte(`"a\n\u00e9\ud83d\ude00"`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := AppendUnescaped(nil, raw)
		v, err2 := StringValue(nil, raw)
		if (err == nil) != (err2 == nil) || !bytes.Equal(got, v) {
			t.Fatalf("AppendUnescaped(%q) = %q, %v; StringValue = %q, %v", raw, got, err, v, err2)
		}
		isLiteral := len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && json.Valid(raw)
		if (err == nil) != isLiteral {
			t.Fatalf("AppendUnescaped(%q) error %v; json.Valid says literal=%v", raw, err, isLiteral)
		}
		if err != nil {
			return
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || asDecoded(got) != s {
			t.Fatalf("AppendUnescaped(%q) = %q; encoding/json says %q, %v", raw, got, s, err)
		}
	})
}
