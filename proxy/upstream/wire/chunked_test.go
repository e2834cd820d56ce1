package wire

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// Malformed or unbounded chunk size lines are refused, not read on.
func TestReadChunkSize(t *testing.T) {
	for in, want := range map[string]int64{
		"9\r\n":                                  9,
		"1f;name=value\r\n":                      31,
		"A \r\n":                                 10,
		"fffffffffffffff\r\n":                    1<<60 - 1,
		"ffffffffffffffff\r\n":                   -1, // 16 digits
		"\r\n":                                   -1,
		"x\r\n":                                  -1,
		"9\n":                                    -1,
		"9;a\nb\r\n":                             -1,
		"9" + strings.Repeat(" ", 5000) + "\r\n": -1,
		"9":                                      -1,
	} {
		got, err := ReadChunkSize(bufio.NewReader(strings.NewReader(in)))
		if want < 0 && err == nil || want >= 0 && (err != nil || got != want) {
			t.Errorf("ReadChunkSize(%.20q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ReadChunkSize(bufio.NewReader(strings.NewReader("9"))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a cut size line: %v", err)
	}
}

func TestChunkBuffered(t *testing.T) {
	for in, want := range map[string]bool{
		"":                               false,
		"9":                              false,
		"9\r":                            false,
		"9\r\n":                          false,
		"9\r\ndata: a\n\n":               false, // no closing CRLF yet
		"9\r\ndata: a\n\n\r":             false,
		"9\r\ndata: a\n\n\r\n":           true,
		"9;ext=1\r\ndata: a\n\n\r\nmore": true,
		"A\r\n0123456789\r\n":            true,
		"a\r\n012345678\r\n":             false,
		"0\r\n\r\n":                      true, // the final chunk, whole
		"0\r\n\r":                        true, // its end's LF is on its way
		"0\r\n":                          true, // its end's CRLF is on its way
		"0\r":                            false,
		"0\r\nX":                         false, // a trailer
		"0;ext=1\r\n\r\n":                true,
		"0\r\nX-Trailer: 1\r\n\r\n":      false, // trailers: their end is not looked for
		"zz\r\n":                         false,
		"fffffffff\r\n":                  false, // nine digits: beyond any gathered chunk
	} {
		if got := ChunkBuffered([]byte(in)); got != want {
			t.Errorf("ChunkBuffered(%q) = %v, want %v", in, got, want)
		}
	}
}
