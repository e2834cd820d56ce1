package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pacedFrame is one frame of a paced stream as the client saw it.
type pacedFrame struct {
	stamp int64     // the frame's ": t=" value
	recv  time.Time // when the client read it
	data  string    // its data line
}

// readPaced sends a streamed chat request with the given control headers on
// a raw connection and returns when the headers arrived and the frames.
func readPaced(t *testing.T, addr string, controls string) (time.Time, time.Time, []pacedFrame) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nAuthorization: Bearer %s\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		testBetaKey, controls, len(body), body)
	br := bufio.NewReader(conn)
	var headers time.Time
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the headers: %v", err)
		}
		if line == "\r\n" {
			headers = time.Now()
			break
		}
	}
	var frames []pacedFrame
	var cur pacedFrame
	for {
		// Chunked framing: size line, then the chunk and CRLF.
		sizeLine, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading a chunk size: %v", err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(sizeLine), 16, 64)
		if err != nil {
			t.Fatalf("chunk size %q: %v", sizeLine, err)
		}
		if n == 0 {
			return start, headers, frames
		}
		chunk := make([]byte, n+2)
		if _, err := io.ReadFull(br, chunk); err != nil {
			t.Fatal(err)
		}
		recv := time.Now()
		for _, line := range strings.Split(string(chunk[:n]), "\n") {
			switch {
			case strings.HasPrefix(line, StampPrefix):
				v, err := strconv.ParseInt(line[len(StampPrefix):], 10, 64)
				if err != nil {
					t.Fatalf("stamp line %q: %v", line, err)
				}
				cur.stamp = v
			case strings.HasPrefix(line, "data: "):
				cur.data, cur.recv = line, recv
			case line == "" && cur.data != "":
				frames = append(frames, cur)
				cur = pacedFrame{}
			}
		}
	}
}

// TestPacedStream: the headers come at once, the first frame after the
// first-event delay, then every frame after the event delay, each with a
// send stamp that increases and lies between the request and its receipt.
func TestPacedStream(t *testing.T) {
	s := startSim(t, Options{NoRecord: true})
	const (
		events = 10
		first  = 200 * time.Millisecond
		delay  = 20 * time.Millisecond
	)
	controls := fmt.Sprintf("x-sim-events: %d\r\nx-sim-first-event: %v\r\nx-sim-event-delay: %v\r\nx-sim-stamp: 1\r\n", events, first, delay)
	start, headers, frames := readPaced(t, s.Addr(), controls)
	if want := events + 3; len(frames) != want { // role, deltas, finish, [DONE]
		t.Fatalf("got %d frames, want %d", len(frames), want)
	}
	if got := frames[0].recv.Sub(headers); got < first/2 {
		t.Errorf("the first frame came %v after the headers, want about %v", got, first)
	}
	if got := headers.Sub(start); got >= first {
		t.Errorf("the headers came %v after the request, not before the first-event delay %v", got, first)
	}
	prev := start.UnixNano()
	for i, f := range frames {
		if f.stamp <= prev {
			t.Fatalf("frame %d: stamp %d not after %d", i, f.stamp, prev)
		}
		if f.stamp > f.recv.UnixNano() {
			t.Fatalf("frame %d: stamped %d, after it was read at %d", i, f.stamp, f.recv.UnixNano())
		}
		if i > 0 && f.stamp-prev < int64(delay) {
			t.Errorf("frame %d: %v after the one before, want at least %v", i, time.Duration(f.stamp-prev), delay)
		}
		prev = f.stamp
	}
	if last := frames[len(frames)-1].data; last != "data: [DONE]" {
		t.Errorf("last frame %q", last)
	}
	if total := time.Duration(prev - frames[0].stamp); total < (events+2)*delay {
		t.Errorf("the frames spanned %v, want at least %v", total, (events+2)*delay)
	}
}

// TestUnstampedStream: without x-sim-stamp no frame carries a comment line.
func TestUnstampedStream(t *testing.T) {
	s := startSim(t, Options{NoRecord: true})
	_, _, frames := readPaced(t, s.Addr(), "x-sim-events: 3\r\n")
	if len(frames) != 6 {
		t.Fatalf("got %d frames, want 6", len(frames))
	}
	for i, f := range frames {
		if f.stamp != 0 {
			t.Fatalf("frame %d has a stamp", i)
		}
	}
}

func TestStampControl(t *testing.T) {
	var c control
	s := New(Options{})
	for _, v := range []string{"2", "x", "-1"} {
		ctx := newCtx("POST", "/v1/chat/completions", map[string]string{"x-sim-stamp": v}, nil)
		if err := s.readControl(&ctx.Request.Header, &c); err == nil {
			t.Errorf("x-sim-stamp: %s accepted", v)
		}
	}
	ctx := newCtx("POST", "/v1/chat/completions", map[string]string{"x-sim-stamp": "1", "x-sim-first-event": "300ms"}, nil)
	if err := s.readControl(&ctx.Request.Header, &c); err != nil || !c.stamp || c.firstEvent != 300*time.Millisecond {
		t.Errorf("readControl = %v, stamp %v, first event %v", err, c.stamp, c.firstEvent)
	}
	if got := AppendStamp(nil, time.Unix(1, 5)); !bytes.Equal(got, []byte(": t=1000000005\n")) {
		t.Errorf("AppendStamp = %q", got)
	}
}
