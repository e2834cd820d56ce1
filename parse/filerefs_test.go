package parse

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

const messagesWithFiles = `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[` +
	`{"type":"text","text":"look at file_svc_ these"},` +
	`{"type":"image","source":{"type":"file","file_id":"file_svc_01J0000000000000000000000A"}},` +
	`{"type":"tool_result","tool_use_id":"t","content":[` +
	`{"type":"image","source": { "file_id" : "file_svc_01J0000000000000000000000B", "type":"file" }}]}]}],` +
	`"session_id":"s"}`

func TestFindFileRefs(t *testing.T) {
	f := func(body string, wantIDs ...string) {
		t.Helper()
		var r FileRefs
		if err := FindFileRefs([]byte(body), &r); err != nil {
			t.Fatalf("FindFileRefs(%q): %v", body, err)
		}
		var got []string
		for _, ref := range r.Refs {
			got = append(got, string(ref.FileID))
		}
		if !slices.Equal(got, wantIDs) {
			t.Fatalf("FindFileRefs(%q) = %q; want %q", body, got, wantIDs)
		}
		checkRefSpans(t, []byte(body), &r)
	}
	f(`{}`)
	f(`[]`)
	f(`"source"`)
	f(`{"source":{"type":"file","file_id":"a"}}`, "a")
	f(messagesWithFiles, "file_svc_01J0000000000000000000000A", "file_svc_01J0000000000000000000000B")
	// not file sources
	f(`{"source":{"type":"base64","file_id":"a"}}`)
	f(`{"source":{"type":"file"}}`)
	f(`{"source":{"type":"file","file_id":7}}`)
	f(`{"source":{"type":"file","file_id":null}}`)
	f(`{"source":{"type":["file"],"file_id":"a"}}`)
	f(`{"source":[{"type":"file","file_id":"a"}]}`)
	f(`{"sources":{"type":"file","file_id":"a"}}`)
	f(`{"x":{"type":"file","file_id":"a"}}`)
	f(`["source",{"type":"file","file_id":"a"}]`)
	// escapes in keys and values are decoded
	f(`{"sour\u0063e":{"typ\u0065":"fil\u0065","file\u005fid":"a\u0062\"c"}}`, `ab"c`)
	// the last member of a key wins inside the source object
	f(`{"source":{"type":"file","file_id":"a","file_id":"b"}}`, "b")
	f(`{"source":{"type":"file","type":"url","file_id":"a"}}`)
	f(`{"source":{"type":"url","type":"file","file_id":"a"}}`, "a")
	// every source member counts, repeated or nested anywhere
	f(`{"source":{"type":"file","file_id":"a"},"source":{"type":"file","file_id":"b"}}`, "a", "b")
	f(`[[[{"a":[{"source":{"type":"file","file_id":"x"}}]}]],{"source":{"type":"file","file_id":"y"}}]`, "x", "y")
	// a file source inside another one gives way to it
	f(`{"source":{"type":"file","file_id":"outer","source":{"type":"file","file_id":"inner"}}}`, "outer")
	// a file source inside a source that is not a file source counts
	f(`{"source":{"type":"url","x":{"source":{"type":"file","file_id":"in"}}}}`, "in")
	// invalid UTF-8 passes through
	f("{\"source\":{\"type\":\"file\",\"file_id\":\"a\xffb\"}}", "a\xffb")
	f(" \n{\"source\" : {\"type\" : \"file\" , \"file_id\" : \"a\"} } \t", "a")
}

// checkRefSpans checks that the spans are ascending and disjoint, and that each one holds a
// JSON object that encoding/json decodes to a file source with the reported id.
func checkRefSpans(t *testing.T, body []byte, r *FileRefs) {
	t.Helper()
	prevEnd := 0
	for _, ref := range r.Refs {
		if ref.Start < prevEnd || ref.End <= ref.Start || ref.End > len(body) {
			t.Fatalf("FindFileRefs(%q): span [%d,%d) after %d", body, ref.Start, ref.End, prevEnd)
		}
		prevEnd = ref.End
		obj := body[ref.Start:ref.End]
		id, ok := oracleFileSource(obj)
		if !ok || id != asDecoded(ref.FileID) {
			t.Fatalf("FindFileRefs(%q): span %q is not a file source of %q (oracle: %q %v)", body, obj, ref.FileID, id, ok)
		}
	}
}

func TestFindFileRefsErrors(t *testing.T) {
	f := func(body string) {
		t.Helper()
		var r FileRefs
		r.Refs = append(r.Refs, FileRef{FileID: []byte("stale")})
		err := FindFileRefs([]byte(body), &r)
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) {
			t.Fatalf("FindFileRefs(%q) = %v; want a *SyntaxError", body, err)
		}
		if len(r.Refs) != 0 {
			t.Fatalf("FindFileRefs(%q) failed but left %d refs", body, len(r.Refs))
		}
	}
	f(``)
	f(`   `)
	f(`{`)
	f(`{"source":{"type":"file","file_id":"a"}`)
	f(`{"source":{"type":"file","file_id":"a"}} x`)
	f(`{"source":{"type":"file","file_id":"a",}}`)
	f(`{"source" {"type":"file"}}`)
	f(`{source:1}`)
	f(`[1,]`)
	f(`[1 2]`)
	f(`{"a":tru}`)
	f("{\"a\":\"\x01\"}")
	f(`{"a":"\x"}`)
	f(strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1))
	f(`{"a":` + strings.Repeat(`{"a":`, maxDepth) + `1` + strings.Repeat(`}`, maxDepth+1))
}

func TestFindFileRefsDepthLimit(t *testing.T) {
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	var r FileRefs
	if err := FindFileRefs([]byte(deep), &r); err != nil {
		t.Fatalf("nesting of exactly %d levels: %v", maxDepth, err)
	}
	if json.Valid([]byte(deep)) != true {
		t.Fatal("encoding/json disagrees on the depth limit")
	}
}

func TestFindFileRefsReuse(t *testing.T) {
	var r FileRefs
	if err := FindFileRefs([]byte(`{"source":{"type":"file","file_id":"a\u0062"}}`), &r); err != nil {
		t.Fatal(err)
	}
	if err := FindFileRefs([]byte(`{"x":1}`), &r); err != nil || len(r.Refs) != 0 {
		t.Fatalf("reuse: %v %d", err, len(r.Refs))
	}
	if err := FindFileRefs([]byte(`{"source":{"type":"file","file_id":"c\u0064"}}`), &r); err != nil ||
		len(r.Refs) != 1 || string(r.Refs[0].FileID) != "cd" {
		t.Fatalf("reuse: %v %+v", err, r.Refs)
	}
}

// oracleFileRefs derives with encoding/json the file ids FindFileRefs must report for a
// valid JSON value, in body order.
func oracleFileRefs(t *testing.T, raw []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // a number too large for a float64 is still valid JSON
	tok, err := dec.Token()
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	var ids []string
	switch tok {
	case json.Delim('{'):
		for dec.More() {
			k, _ := dec.Token()
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("oracle: %v", err)
			}
			if id, ok := oracleFileSource(v); ok && k == "source" {
				ids = append(ids, id)
				continue
			}
			ids = append(ids, oracleFileRefs(t, v)...)
		}
	case json.Delim('['):
		for dec.More() {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("oracle: %v", err)
			}
			ids = append(ids, oracleFileRefs(t, v)...)
		}
	}
	return ids
}

// oracleFileSource reports whether obj is a file source object, and its file_id.
func oracleFileSource(obj []byte) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return "", false
	}
	var typ, id string
	if json.Unmarshal(m["type"], &typ) != nil || typ != "file" || m["file_id"] == nil {
		return "", false
	}
	if json.Unmarshal(m["file_id"], &id) != nil || bytes.Equal(m["file_id"], []byte("null")) {
		return "", false
	}
	return id, true
}

// FuzzFileRefs checks FindFileRefs against encoding/json: it accepts exactly the valid JSON
// values, reports the file sources the oracle finds, in order, and its spans hold them.
func FuzzFileRefs(f *testing.F) {
	f.Add([]byte(messagesWithFiles))
	f.Add([]byte(`{"source":{"type":"file","file_id":"a"},"source":{"type":"file","file_id":"b"}}`))
	f.Add([]byte(`{"source":{"type":"file","file_id":"outer","source":{"type":"file","file_id":"inner"}}}`))
	f.Add([]byte(`{"sour\u0063e":{"typ\u0065":"fil\u0065","file\u005fid":"a\u0062\"c"}}`))
	f.Add([]byte(`[{"source":{"type":"url","x":{"source":{"type":"file","file_id":"in"}}}}, 1, "x", null]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r FileRefs
		err := FindFileRefs(body, &r)
		valid := json.Valid(body)
		if (err == nil) != valid {
			t.Fatalf("FindFileRefs(%q) = %v; json.Valid = %v", body, err, valid)
		}
		if !valid {
			return
		}
		var got []string
		for _, ref := range r.Refs {
			got = append(got, asDecoded(ref.FileID))
		}
		if want := oracleFileRefs(t, body); !slices.Equal(got, want) {
			t.Fatalf("FindFileRefs(%q) = %q; encoding/json says %q", body, got, want)
		}
		checkRefSpans(t, body, &r)
	})
}

func BenchmarkFindFileRefs(b *testing.B) {
	body := []byte(messagesWithFiles)
	var r FileRefs
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := FindFileRefs(body, &r); err != nil || len(r.Refs) != 2 {
			b.Fatal(err)
		}
	}
}
