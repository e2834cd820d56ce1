package parse

import (
	"bytes"
	"testing"
)

func TestAppendWithoutSessionID(t *testing.T) {
	f := func(body, want string) {
		t.Helper()
		var fl Fields
		if err := Peek([]byte(body), &fl); err != nil {
			t.Fatalf("Peek(%q): %s", body, err)
		}
		if !fl.HasSessionID() {
			t.Fatalf("HasSessionID(%q) = false", body)
		}
		model := string(fl.Model)
		out := AppendWithoutSessionID([]byte("prefix:"), []byte(body), &fl)
		if !bytes.HasPrefix(out, []byte("prefix:")) {
			t.Fatalf("AppendWithoutSessionID dropped dst: %q", out)
		}
		out = out[len("prefix:"):]
		if string(out) != want {
			t.Fatalf("AppendWithoutSessionID(%q)\n got %q\nwant %q", body, out, want)
		}
		checkSplice(t, []byte(body), out)
		// the result has no session_id left and keeps the other fields
		if err := Peek(out, &fl); err != nil || fl.HasSessionID() || string(fl.Model) != model {
			t.Fatalf("Peek of spliced %q: %v, HasSessionID %v, model %q", out, err, fl.HasSessionID(), fl.Model)
		}
	}

	// position
	f(`{"session_id":"s","model":"m"}`, `{"model":"m"}`)
	f(`{"model":"m","session_id":"s"}`, `{"model":"m"}`)
	f(`{"model":"m","session_id":"s","stream":true}`, `{"model":"m","stream":true}`)
	f(`{"session_id":"a"}`, `{}`)
	f(`{"session_id":null}`, `{}`)
	f(`{"model":"m","session_id":null}`, `{"model":"m"}`)
	f(`{ "session_id" : "a" }`, `{  }`)

	// whitespace, newlines and tabs around colons and commas
	f("{\n\t\"model\" : \"m\" ,\n\t\"session_id\"\t:\t\"s\" ,\r\n\t\"stream\" : true\n}",
		"{\n\t\"model\" : \"m\" ,\n\t\"stream\" : true\n}")
	f("{\"model\":\"m\" ,\n \"session_id\" : \"s\"\n}", "{\"model\":\"m\"\n}")
	f("{\n  \"session_id\": \"s\",\n  \"model\": \"m\"\n}", "{\n  \"model\": \"m\"\n}")
	f(" {\"session_id\":\"s\"} \n", " {} \n")
	f("{\t\"session_id\"\n:\r\n\"s\"\t\n}", "{\t\t\n}")

	// escaped key, and values holding , } " and escapes
	f(`{"model":"m","session\u005fid":"s"}`, `{"model":"m"}`)
	f(`{"\u0073ession_id":"s","model":"m"}`, `{"model":"m"}`)
	f(`{"session_id":"a,b}\"c\\","model":"m"}`, `{"model":"m"}`)
	f(`{"model":"m","session_id":"}\",{\"x\":1,"}`, `{"model":"m"}`)
	f(`{"model":"m\u00e9","session_id":"s\ud83d\ude00","x":"\/"}`, `{"model":"m\u00e9","x":"\/"}`)

	// nested session_id members stay
	f(`{"metadata":{"session_id":"keep"},"session_id":"s"}`, `{"metadata":{"session_id":"keep"}}`)
	f(`{"session_id":"s","messages":[{"session_id":"keep","content":"a"}]}`, `{"messages":[{"session_id":"keep","content":"a"}]}`)
}

func TestAppendWithoutSessionIDUnchanged(t *testing.T) {
	body := []byte(" {\"model\" :\"m\\u00e9\",\n\"metadata\":{\"session_id\":\"x\"}} ")
	var fl Fields
	if err := Peek(body, &fl); err != nil {
		t.Fatal(err)
	}
	if fl.HasSessionID() {
		t.Fatal("HasSessionID = true for a body with only a nested session_id")
	}
	if out := AppendWithoutSessionID(nil, body, &fl); !bytes.Equal(out, body) {
		t.Fatalf("got %q; want the body unchanged", out)
	}
}

func TestAppendWithoutSessionIDOtherBody(t *testing.T) {
	var fl Fields
	if err := Peek([]byte(`{"session_id":"s"}`), &fl); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a body of another length")
		}
	}()
	AppendWithoutSessionID(nil, []byte(`{"session_id":"s2"}`), &fl)
}
