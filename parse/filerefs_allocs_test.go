//go:build !race

package parse

import "testing"

func TestFindFileRefsAllocs(t *testing.T) {
	f := func(body string) {
		t.Helper()
		b := []byte(body)
		var r FileRefs
		if err := FindFileRefs(b, &r); err != nil { // warms r's buffers
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { _ = FindFileRefs(b, &r) }); n != 0 {
			t.Fatalf("FindFileRefs(%q) allocates %v times per run", body, n)
		}
	}
	f(messagesWithFiles)
	f(`{"sour\u0063e":{"typ\u0065":"fil\u0065","file\u005fid":"a\u0062\"c"}}`)
	f(chatBody)
}
