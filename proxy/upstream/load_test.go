package upstream

import (
	"bytes"
	"errors"
	"testing"
	"testing/iotest"
)

// readAnswer reads an answer of unknown or known length whole, and refuses
// one over the bound having read at most one byte past it.
func TestReadAnswerBound(t *testing.T) {
	f := func(n, size, limit int, wantErr bool) {
		t.Helper()
		body := bytes.Repeat([]byte("x"), n)
		got, err := readAnswer(nil, iotest.OneByteReader(bytes.NewReader(body)), size, limit)
		if wantErr {
			if !errors.Is(err, ErrAnswerTooLarge) || len(got) > limit+1 {
				t.Fatalf("n=%d limit=%d: %v after %d bytes", n, limit, err, len(got))
			}
			return
		}
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("n=%d limit=%d: %v, %d bytes", n, limit, err, len(got))
		}
	}
	f(0, -1, 10, false)
	f(10, -1, 10, false)
	f(10, 10, 10, false)
	f(11, -1, 10, true)
	f(100000, -1, 200000, false)
	f(100000, -1, 99999, true)
}
