package parse

import (
	"encoding/json"
	"errors"
	"testing"
)

// dupBodies are bodies in which a key Peek reads appears twice in spellings that some decoder
// takes for the same key, or once as a case variant; field is the key named in the error.
var dupBodies = []struct{ body, field string }{
	{`{"model":"a","model":"b"}`, "model"},
	{`{"model":1,"model":"b"}`, "model"},
	{`{"previous_response_id":"resp_other","input":"x","previous_response_id":"resp_mine"}`, "previous_response_id"},
	{`{"previous_response_id":"resp_mine","previous_response_id":null}`, "previous_response_id"},
	{`{"session_id":"a","session_id":null}`, "session_id"},
	{`{"stream":true,"stream":false}`, "stream"},
	{`{"store":false,"store":true}`, "store"},
	{`{"prompt":"a","prompt":"b"}`, "prompt"},
	{`{"stream_options":{},"stream_options":{"include_usage":true}}`, "stream_options"},
	{`{"stream_options":{},"Stream_Options":{}}`, "stream_options"},
	{`{"streamOptions":{"include_usage":true}}`, "stream_options"},
	// include_usage in stream_options: the gateway reads and may set it
	{`{"stream_options":{"include_usage":false,"include_usage":true}}`, "stream_options.include_usage"},
	{`{"stream_options":{"include_usage":true,"include\u005fusage":false}}`, "stream_options.include_usage"},
	{`{"stream_options":{"Include_Usage":true}}`, "stream_options.include_usage"},
	{`{"stream_options":{"includeUsage":false}}`, "stream_options.include_usage"},
	{`{"stream_options":{"include_usage":null,"include_uſage":1}}`, "stream_options.include_usage"},
	// escaped spellings
	{`{"mod\u0065l":"a","model":"b"}`, "model"},
	{`{"previous_response_id":"a","previous\u005fresponse\u005fid":"b"}`, "previous_response_id"},
	{`{"\u0073tream":false,"stream":true}`, "stream"},
	// case variants, beside the key and alone
	{`{"MODEL":"a","model":"b"}`, "model"},
	{`{"model":"a","Model":"b"}`, "model"},
	{`{"Previous_Response_ID":"a","previous_response_id":"b"}`, "previous_response_id"},
	{`{"MODEL":"a"}`, "model"},
	{`{"Stream":true}`, "stream"},
	{`{"Store":false}`, "store"},
	{`{"PROMPT":"p"}`, "prompt"},
	{`{"SESSION_ID":"s"}`, "session_id"},
	{`{"M\u004fDEL":"a"}`, "model"},
	// Unicode folding as encoding/json does it: U+017F (long s) folds to s
	{`{"ſtream":true}`, "stream"},
	{`{"\u017ftream":true,"stream":false}`, "stream"},
	{`{"previouſ_reſponſe_id":"a","previous_response_id":"b"}`, "previous_response_id"},
	{`{"ſeſſion_id":"a"}`, "session_id"},
	{`{"ſtore":true}`, "store"},
	// encoding/json/v2 ignores underscores and dashes when it ignores case
	{`{"previousResponseId":"resp_other"}`, "previous_response_id"},
	{`{"previous_response_id":"resp_mine","previous-response-id":"resp_other"}`, "previous_response_id"},
	{`{"sessionId":"a"}`, "session_id"},
	{`{"_model":"a"}`, "model"},
	{`{"st_ream":true}`, "stream"},
	// the duplicate wins over a later syntax error
	{`{"model":"a","model":"b",`, "model"},
}

func TestPeekRefusesDuplicateFields(t *testing.T) {
	for _, tc := range dupBodies {
		var f Fields
		err := Peek([]byte(tc.body), &f)
		var de *DuplicateFieldError
		if !errors.As(err, &de) || de.Field != tc.field || !errors.Is(err, ErrDuplicateField) {
			t.Errorf("Peek(%q) = %v; want a DuplicateFieldError for %s", tc.body, err, tc.field)
			continue
		}
		if f.Model != nil || f.HasSessionID() {
			t.Errorf("Peek(%q) left fields set after an error: %+v", tc.body, f)
		}
		if json.Valid([]byte(tc.body)) {
			checkPeekAgainstOracle(t, []byte(tc.body))
		}
	}
}

// TestGoFoldsKeys pins what encoding/json does with the spellings above, the reason they are
// refused: a Go provider takes them for the key.
func TestGoFoldsKeys(t *testing.T) {
	for body, want := range map[string]bool{
		`{"ſtream":true}`:      true,
		`{"STREAM":true}`:      true,
		`{"\u017ftream":true}`: true,
	} {
		var v struct {
			Stream bool `json:"stream"`
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil || v.Stream != want {
			t.Errorf("encoding/json on %s: stream = %v, %v; want %v", body, v.Stream, err, want)
		}
	}
}

func TestPeekAcceptsOtherKeys(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","models":"x","mode":"y","Model_name":"z","stream_option":{},"stream_optionz":{}}`,
		`{"stream_options":{"include_usage":true,"include_usages":1,"usage":2},"include_usage":false}`,
		`{"stream_options":{"include_obfuscation":false},"x":{"stream_options":1,"stream_options":2}}`,
		`{"model":"m","metadata":{"model":"a","MODEL":"b","model":"c"},"messages":[{"Model":"x"}]}`,
		`{"model":"m","system":"s","ſystem":"t","stop":[],"seed":1,"prompt_cache_key":"k"}`,
		`{"model":"m","session":"s","sessions_id":"t","_":1,"-----":2,"previous_response":"p"}`,
		`{"mod\u0065l":"m","session\u005fid":"s","st\u006fre":false}`,
		`{"modeI":"homoglyph","mode1":"x","modél":"y","strea":1,"streams":2}`,
	} {
		var f Fields
		if err := Peek([]byte(body), &f); err != nil {
			t.Errorf("Peek(%q) = %v; want accepted", body, err)
			continue
		}
		checkPeekAgainstOracle(t, []byte(body))
	}
}

func TestDuplicateFieldErrorMessage(t *testing.T) {
	var f Fields
	err := Peek([]byte(`{"model":"a","model":"b"}`), &f)
	if got := err.Error(); got != "model appears more than once (counting escaped and case variants of it)" {
		t.Errorf("message %q", got)
	}
	err = Peek([]byte(`{"Model":"a"}`), &f)
	if got := err.Error(); got != `model must be spelled exactly "model": a case variant of it is ambiguous` {
		t.Errorf("message %q", got)
	}
}
