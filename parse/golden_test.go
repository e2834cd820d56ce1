package parse

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden .events files under testdata/sse")

// TestScannerGolden scans the SSE transcripts under testdata/sse, whole and in chunks of
// several sizes, and compares the events with the golden .events files (one JSON object per
// event) and with the reference parser.
func TestScannerGolden(t *testing.T) {
	paths, err := filepath.Glob("testdata/sse/*.sse")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			stream, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := scanChunks(NewScanner(4096), [][]byte{stream})
			if err != nil {
				t.Fatal(err)
			}
			for _, size := range []int{1, 2, 3, 7, 64, 100} {
				chunked, err := scanChunks(NewScanner(4096), chunksOf(stream, size))
				if err != nil || !sameEvents(chunked, got) {
					t.Fatalf("in chunks of %d: %q, %v; whole: %q", size, chunked, err, got)
				}
			}
			if ref := referenceEvents(string(stream)); !sameEvents(ref, got) {
				t.Fatalf("got %q; the reference parser gives %q", got, ref)
			}
			checkGolden(t, strings.TrimSuffix(path, ".sse")+".events", got)
		})
	}
}

func checkGolden(t *testing.T, path string, evs []sseEvent) {
	t.Helper()
	var b bytes.Buffer
	for _, ev := range evs {
		line, err := json.Marshal(map[string]string{"event": ev.name, "data": ev.data})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s (run with -update to create it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("events differ from %s:\n got %s\nwant %s", path, b.Bytes(), want)
	}
}

func TestScannerResponsesID(t *testing.T) {
	stream, err := os.ReadFile("testdata/sse/beta_responses.sse")
	if err != nil {
		t.Fatal(err)
	}
	s := NewScanner(4096)
	s.Feed(stream[:40]) // the first event is not complete yet
	if _, ok, err := s.Next(); ok || err != nil {
		t.Fatalf("event before its end: %v %v", ok, err)
	}
	s.Feed(stream[40:])
	ev, ok, err := s.Next()
	if !ok || err != nil || string(ev.Name) != "response.created" {
		t.Fatalf("first event: %q %v %v", ev.Name, ok, err)
	}
	id, err := StringValue(nil, Member(Member(ev.Data, "response"), "id"))
	if err != nil || string(id) != "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b" {
		t.Fatalf("response id %q, %v", id, err)
	}
}

func chunksOf(b []byte, size int) [][]byte {
	var chunks [][]byte
	for len(b) > size {
		chunks = append(chunks, b[:size])
		b = b[size:]
	}
	return append(chunks, b)
}

func sameEvents(a, b []sseEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
