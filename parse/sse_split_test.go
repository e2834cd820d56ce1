package parse

import (
	"strings"
	"testing"
)

// splitLines feeds chunks to a Splitter and returns the lines it ended, a
// blank line as "", and whether the stream stopped inside a line.
func splitLines(t *testing.T, chunks [][]byte) (lines []string, inLine bool) {
	t.Helper()
	var s Splitter
	var cur strings.Builder
	for _, c := range chunks {
		s.Feed(c)
		for {
			piece, end, ok := s.Next()
			if !ok {
				break
			}
			cur.Write(piece)
			switch end {
			case BlankLine:
				if cur.Len() != 0 {
					t.Fatalf("blank line after %q", cur.String())
				}
				lines = append(lines, "")
			case LineEnd:
				if cur.Len() == 0 {
					t.Fatal("an empty line reported as not blank")
				}
				lines = append(lines, cur.String())
				cur.Reset()
			}
		}
	}
	return lines, s.InLine()
}

// referenceLines splits a whole stream as the EventSource specification
// words it: every CRLF, CR and LF ends a line.
func referenceLines(stream string) (lines []string, inLine bool) {
	stream = strings.ReplaceAll(stream, "\r\n", "\n")
	stream = strings.ReplaceAll(stream, "\r", "\n")
	lines = strings.Split(stream, "\n")
	return lines[:len(lines)-1], lines[len(lines)-1] != ""
}

// Lines end in LF, CRLF or a bare CR, and a stream split anywhere, a CRLF
// included, splits into the same lines.
func TestSplitterLineEnds(t *testing.T) {
	f := func(stream string) {
		t.Helper()
		want, wantIn := referenceLines(stream)
		for cut := 0; cut <= len(stream); cut++ {
			for cut2 := cut; cut2 <= len(stream); cut2++ {
				got, in := splitLines(t, splitAt([]byte(stream), cut, cut2))
				if strings.Join(got, "|") != strings.Join(want, "|") || in != wantIn {
					t.Fatalf("%q cut at %d and %d: lines %q (in a line %v), want %q (%v)", stream, cut, cut2, got, in, want, wantIn)
				}
			}
		}
		bytewise := make([][]byte, len(stream))
		for i := range stream {
			bytewise[i] = []byte(stream[i : i+1])
		}
		if got, _ := splitLines(t, bytewise); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("%q byte by byte: %q, want %q", stream, got, want)
		}
	}
	f("data: a\n\ndata: b\n\n")
	f("data: a\r\n\r\ndata: b\r\n\r\n")
	f("data: a\r\rdata: b\r\r")
	f("event: x\rdata: a\r\ndata: b\n\r\n\rdata: c")
	f("\r\n\r\n\n\r\r")
	f(": comment\ndata: unfinished")
	f("data: cut after CR\r")
	f("")
}

// LastEventEnd finds the end of the last blank line, whatever the line ends.
func TestLastEventEnd(t *testing.T) {
	for in, want := range map[string]int{
		"":                           0,
		"data: a":                    0,
		"data: a\n":                  0,
		"data: a\n\n":                9,
		"data: a\n\ndata: b":         9,
		"data: a\r\n\r\ndata: b":     11,
		"data: a\r\rdata: b":         9,
		"data: a\r\n\r":              10,
		"data: a\r\n\r\n":            11,
		"data: a\n\ndata: b\n\n":     18,
		"data: a\n\ndata: b\r\n\r\n": 20,
		"data: a\n\ndata: b\r\r":     18,
	} {
		if got := LastEventEnd([]byte(in)); got != want {
			t.Errorf("LastEventEnd(%q) = %d, want %d", in, got, want)
		}
	}
}

// The Splitter ends events where Scanner does: the events with data that a
// count over its blank lines finds are the Scanner's, in every line-end
// style and however the stream is cut.
func TestSplitterAgreesWithScanner(t *testing.T) {
	for _, stream := range []string{
		"data: a\n\n: c\n\nevent: e\n\ndata: b\ndata: c\n\n",
		"data: a\r\n\r\n: c\r\n\r\ndata: b\r\n\r\ndata: unfinished",
		"data: a\r\r: c\r\rdata: b\r\rdata\r\r",
	} {
		for cut := 0; cut <= len(stream); cut++ {
			chunks := splitAt([]byte(stream), cut)
			evs, err := scanChunks(NewScanner(0), chunks)
			if err != nil {
				t.Fatal(err)
			}
			lines, _ := splitLines(t, chunks)
			events, hasData := 0, false
			for _, l := range lines {
				switch {
				case l == "":
					if hasData {
						events++
					}
					hasData = false
				case l == "data" || strings.HasPrefix(l, "data:"):
					hasData = true
				}
			}
			if events != len(evs) {
				t.Fatalf("%q cut at %d: %d events by the Splitter, %d by the Scanner", stream, cut, events, len(evs))
			}
		}
	}
}
