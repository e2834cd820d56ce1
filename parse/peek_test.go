package parse

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Peek finds store and prompt in its one pass, as Member finds them in a second.
func TestPeekStoreAndPrompt(t *testing.T) {
	f := func(body string, noStore bool, prompt string) {
		t.Helper()
		var fl Fields
		if err := Peek([]byte(body), &fl); err != nil {
			t.Fatalf("Peek(%q): %v", body, err)
		}
		if fl.NoStore != noStore || string(fl.RawPrompt) != prompt || (prompt == "") != (fl.RawPrompt == nil) {
			t.Fatalf("Peek(%q): NoStore %v, RawPrompt %q; want %v, %q", body, fl.NoStore, fl.RawPrompt, noStore, prompt)
		}
		checkStoreAndPrompt(t, []byte(body), &fl)
		fl.Reset()
		if fl.NoStore || fl.RawPrompt != nil {
			t.Fatalf("Reset kept NoStore %v, RawPrompt %q", fl.NoStore, fl.RawPrompt)
		}
	}
	f(`{"model":"m","input":"x"}`, false, "")
	f(`{"model":"m","store":false}`, true, "")
	f(`{"store" : false , "model":"m"}`, true, "")
	f(`{"model":"m","store":true}`, false, "")
	f(`{"model":"m","store":null}`, false, "")
	f(`{"model":"m","store":"false"}`, false, "")
	f(`{"model":"m","st\u006fre":false}`, true, "")
	f(`{"x":{"store":false},"prompt":"a cat"}`, false, `"a cat"`)
	f(`{"prompt":"a \"cat\"\u00e9","model":"m"}`, false, `"a \"cat\"\u00e9"`)
	f(`{"prompt":null}`, false, "null")
	f(`{"prompt":""}`, false, `""`)
	f(`{"prompt":["a",{"b":1}]}`, false, `["a",{"b":1}]`)
	f(`{"x":[{"prompt":"nested"}]}`, false, "")
}

func TestPeekFields(t *testing.T) {
	const absent = "\x00absent"
	f := func(body, model, session, previous string, stream, hasSession bool) {
		t.Helper()
		var fl Fields
		if err := Peek([]byte(body), &fl); err != nil {
			t.Fatalf("Peek(%q): unexpected error: %s", body, err)
		}
		check := func(name string, got []byte, want string) {
			t.Helper()
			if want == absent {
				if got != nil {
					t.Fatalf("Peek(%q): %s = %q; want absent", body, name, got)
				}
				return
			}
			if got == nil || string(got) != want {
				t.Fatalf("Peek(%q): %s = %q (nil: %v); want %q", body, name, got, got == nil, want)
			}
		}
		check("model", fl.Model, model)
		check("session_id", fl.SessionID, session)
		check("previous_response_id", fl.PreviousResponseID, previous)
		if fl.Stream != stream {
			t.Fatalf("Peek(%q).Stream = %v; want %v", body, fl.Stream, stream)
		}
		if fl.HasSessionID() != hasSession {
			t.Fatalf("Peek(%q).HasSessionID() = %v; want %v", body, fl.HasSessionID(), hasSession)
		}
		// The table itself must agree with encoding/json.
		checkPeekAgainstOracle(t, []byte(body))
	}

	// present and absent
	f(`{}`, absent, absent, absent, false, false)
	f(`{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`, "gpt-x", absent, absent, false, false)
	f(`{"model":"m","session_id":"s1","previous_response_id":"resp_1","stream":true}`, "m", "s1", "resp_1", true, true)
	f(`{"model":""}`, "", absent, absent, false, false)
	f(`{"session_id":""}`, absent, "", absent, false, true)

	// null
	f(`{"session_id":null,"previous_response_id":null}`, absent, absent, absent, false, true)
	f(`{"stream":null}`, absent, absent, absent, false, false)

	// stream is true only for the literal true
	f(`{"stream":false}`, absent, absent, absent, false, false)
	f(`{"stream":"true"}`, absent, absent, absent, false, false)
	f(`{"stream":1}`, absent, absent, absent, false, false)
	f(`{"stream":[true]}`, absent, absent, absent, false, false)

	// a repeated key is refused: dupkeys_test.go
	// escapes in keys
	f(`{"mod\u0065l":"m"}`, "m", absent, absent, false, false)
	f(`{"\u006D\u006f\u0064\u0065\u006c":"m"}`, "m", absent, absent, false, false)
	f(`{"session\u005fid":"s"}`, absent, "s", absent, false, true)
	f(`{"previous\u005fresponse\u005fid":"r"}`, absent, absent, "r", false, false)
	f(`{"\u0073tream":true}`, absent, absent, absent, true, false)
	f(`{"model\u0000":"x","\"model":"y","model ":"w"}`, absent, absent, absent, false, false)
	f(`{"mod\/el":"x","mode":"y","models":"z","":"e"}`, absent, absent, absent, false, false)

	// escapes in values
	f(`{"model":"a\"b\\c\/d\n\u00e9\ud83d\ude00"}`, "a\"b\\c/d\né😀", absent, absent, false, false)
	f(`{"model":"\b\f\r\t"}`, "\b\f\r\t", absent, absent, false, false)
	f(`{"model":"x\ud800y"}`, "x\uFFFDy", absent, absent, false, false)
	f(`{"model":"\udc00\ud800\ud800\udc00"}`, "\uFFFD\uFFFD\U00010000", absent, absent, false, false)
	f(`{"model":"a\u0000b"}`, "a\x00b", absent, absent, false, false)
	f(`{"model":"m\u00e9","session_id":"s\tx","previous_response_id":"r\\"}`, "mé", "s\tx", "r\\", false, true)

	// raw unicode
	f(`{"model":"模型-ü-😀","session_id":"セッション"}`, "模型-ü-😀", "セッション", absent, false, true)

	// nested keys are not top-level
	f(`{"metadata":{"model":"inner","session_id":"inner","stream":true},"messages":[{"model":"x"},["session_id"]],"model":"outer"}`,
		"outer", absent, absent, false, false)
	f(`{"a":{"b":{"c":[[[{"session_id":"deep"}]]]}}}`, absent, absent, absent, false, false)

	// whitespace everywhere
	f(" \t\r\n{ \"model\" \t:\n \"m\" ,\r\n\"stream\"  :  true , \"x\" : [ 1 , { } , [ ] ] } \n",
		"m", absent, absent, true, false)

	// every kind of value, skipped
	f(`{"n":[-0.5e+10,0,-0,1E5,2.25e-3,12345678901234567890],"t":true,"f":false,"z":null,"o":{},"a":[],"s":"","model":"m"}`,
		"m", absent, absent, false, false)

	// long values, with escapes at every position of an 8-byte word
	for i := 0; i < 24; i++ {
		v := strings.Repeat("x", i) + `\"` + strings.Repeat("y", 40-i)
		want := strings.Repeat("x", i) + `"` + strings.Repeat("y", 40-i)
		f(`{"model":"`+v+`"}`, want, absent, absent, false, false)
	}
}

func TestPeekErrors(t *testing.T) {
	f := func(body string, want error) {
		t.Helper()
		var fl Fields
		err := Peek([]byte(body), &fl)
		if !errors.Is(err, want) {
			t.Fatalf("Peek(%q) error = %v; want %v", body, err, want)
		}
		if fl.Model != nil || fl.SessionID != nil || fl.HasSessionID() || fl.Stream {
			t.Fatalf("Peek(%q) failed but left fields set: %+v", body, fl)
		}
		if errors.Is(want, ErrSyntax) || want == ErrNotObject {
			if json.Valid([]byte(body)) && want != ErrNotObject {
				t.Fatalf("BUG in test: %q is valid JSON", body)
			}
		}
		if !errors.Is(want, ErrSyntax) && json.Valid([]byte(body)) {
			checkPeekAgainstOracle(t, []byte(body))
		}
	}

	// not an object
	for _, body := range []string{"", "  \n", "[]", `"x"`, "null", "1", "true", `[{"model":"m"}]`, "x{}", "\ufeff{}"} {
		f(body, ErrNotObject)
	}

	// malformed
	for _, body := range []string{
		`{`, `{"model"`, `{"model":`, `{"model":"m"`, `{"model":"m`, `{"model":"m",`,
		`{"model":"m",}`, `{,}`, `{"a":1,,"b":2}`, `{"a" 1}`, `{"a"::1}`, `{"a":1 "b":2}`,
		`{"a":[1,2}`, `{"a":{"b":1]}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 2]}`, `{"a":{"b"}}`,
		`{"a":{"b":}}`, `{"a":{,}}`, `{"a":{"b":1,}}`, `{"a":[}`, `{"a":]}`, `{"a":}`,
		`{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12G4"}`, `{"a":"\`, `{"a":"\u`, `{"a":"\'"}`,
		"{\"a\":\"x\ny\"}", "{\"a\":\"\t\"}", "{\"a\":\"\x00\"}", "{\"a\x1f\":1}", "{\"model\":\"m\x7f\x01\"}",
		`{"a":tru}`, `{"a":nul}`, `{"a":True}`, `{"a":falsey}`, `{"a":NaN}`, `{"a":Infinity}`,
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":1e+}`, `{"a":-}`, `{"a":+1}`, `{"a":0x1}`, `{"a":1.5.5}`,
		`{"a":1}x`, `{"a":1}{}`, `{"a":1} }`, `{"a":1},`, `{}]`, `{'a':1}`, `{a:1}`, `{"a":'b'}`,
		`{"a":"unterminated}`, `{"a":[[[[`, `{"a":{"b":{"c":{}}}`, `{"a":1}` + "\x00",
		`{"a":1}/*c*/`,
	} {
		f(body, ErrSyntax)
	}

	// control characters, quotes and bad escapes at every position of an 8-byte word
	for i := 0; i < 24; i++ {
		for _, c := range []string{"\x00", "\x01", "\n", "\x1f", `\x`, `\u00G0`} {
			f(`{"model":"`+strings.Repeat("x", i)+c+strings.Repeat("y", 30-i)+`"}`, ErrSyntax)
		}
		f(`{"model":"`+strings.Repeat("x", i)+`"`+strings.Repeat("y", 30-i)+`"}`, ErrSyntax)
	}

	// wrong types; a syntax error wins over a type error
	f(`{"model":1}`, ErrModelType)
	f(`{"model":null}`, ErrModelType)
	f(`{"model":["a"]}`, ErrModelType)
	f(`{"model":{"id":"a"}}`, ErrModelType)
	f(`{"model":true,"session_id":1}`, ErrModelType)
	f(`{"session_id":1}`, ErrSessionIDType)
	f(`{"session_id":{"a":1}}`, ErrSessionIDType)
	f(`{"previous_response_id":false}`, ErrPreviousResponseIDType)
	f(`{"previous_response_id":[]}`, ErrPreviousResponseIDType)
	f(`{"model":1,`, ErrSyntax)
}

func TestPeekErrorMessages(t *testing.T) {
	f := func(err error, want string) {
		t.Helper()
		if err.Error() != want {
			t.Fatalf("error message %q; want %q", err.Error(), want)
		}
	}
	f(ErrModelType, "model must be a string")
	f(ErrSessionIDType, "session_id must be a string")
	f(ErrPreviousResponseIDType, "previous_response_id must be a string")
	f(ErrNotObject, "request body must be a JSON object")

	var fl Fields
	err := Peek([]byte(`{"model":"m",}`), &fl)
	f(err, "request body is not valid JSON: expected a string key at byte 13")
	var se *SyntaxError
	if !errors.As(err, &se) || se.Offset != 13 {
		t.Fatalf("errors.As(%v, *SyntaxError) = %+v", err, se)
	}
	var fe *FieldTypeError
	if err := Peek([]byte(`{"session_id":7}`), &fl); !errors.As(err, &fe) || fe.Field != "session_id" {
		t.Fatalf("errors.As(%v, *FieldTypeError) = %+v", err, fe)
	}
}

func TestPeekDepth(t *testing.T) {
	f := func(depth int, wantOK bool) {
		t.Helper()
		// depth counts the top-level object, as encoding/json does
		body := `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `,"model":"m"}`
		var fl Fields
		err := Peek([]byte(body), &fl)
		if (err == nil) != wantOK {
			t.Fatalf("Peek at depth %d: error %v; want ok=%v", depth, err, wantOK)
		}
		if json.Valid([]byte(body)) != wantOK {
			t.Fatalf("json.Valid disagrees at depth %d", depth)
		}
		if wantOK && string(fl.Model) != "m" {
			t.Fatalf("Peek at depth %d: model %q", depth, fl.Model)
		}
	}
	f(2, true)
	f(65, true)
	f(66, true)
	f(maxDepth, true)
	f(maxDepth+1, false)

	// mixed objects and arrays deeper than one stack word, closed in the right order
	var b strings.Builder
	b.WriteString(`{"a":`)
	for i := 0; i < 200; i++ {
		if i%3 == 0 {
			b.WriteString(`{"k":`)
		} else {
			b.WriteString(`[0,`)
		}
	}
	b.WriteString("1")
	for i := 199; i >= 0; i-- {
		if i%3 == 0 {
			b.WriteString(`}`)
		} else {
			b.WriteString(`]`)
		}
	}
	b.WriteString(`,"model":"deep"}`)
	var fl Fields
	if err := Peek([]byte(b.String()), &fl); err != nil || string(fl.Model) != "deep" {
		t.Fatalf("Peek of mixed nesting: %v, model %q", err, fl.Model)
	}
	// the same with one bracket swapped must fail
	bad := []byte(b.String())
	i := strings.LastIndex(string(bad), "]")
	bad[i] = '}'
	if err := Peek(bad, &fl); !errors.Is(err, ErrSyntax) {
		t.Fatalf("Peek of mismatched nesting: %v", err)
	}
}

func TestPeekReuse(t *testing.T) {
	var fl Fields
	body1 := []byte(`{"model":"a\u00e9","session_id":"s\n1","previous_response_id":"r\/1"}`)
	if err := Peek(body1, &fl); err != nil {
		t.Fatal(err)
	}
	// values decoded into Fields' buffer are capped: appending to one does not clobber another
	_ = append(fl.Model, "XXXXXXXX"...)
	if string(fl.Model) != "aé" || string(fl.SessionID) != "s\n1" || string(fl.PreviousResponseID) != "r/1" {
		t.Fatalf("got %q %q %q", fl.Model, fl.SessionID, fl.PreviousResponseID)
	}
	body2 := []byte(`{"model":"plain"}`)
	if err := Peek(body2, &fl); err != nil {
		t.Fatal(err)
	}
	if string(fl.Model) != "plain" || fl.SessionID != nil || fl.PreviousResponseID != nil || fl.HasSessionID() {
		t.Fatalf("fields after reuse: %+v", fl)
	}
	if &fl.Model[0] != &body2[10] {
		t.Fatalf("a value without escapes must point into the body")
	}
	fl.Reset()
	if fl.Model != nil || fl.HasSessionID() {
		t.Fatalf("Reset left fields set: %+v", fl)
	}
}
