package sim

import (
	"bytes"
	"image/png"
	"testing"
)

func TestPaddedPNG(t *testing.T) {
	base := makePNG(7, 3, "x")
	f := func(total, wantLen int) {
		t.Helper()
		got := appendPaddedPNG(nil, base, total)
		if len(got) != wantLen {
			t.Fatalf("total %d: got %d bytes, want %d", total, len(got), wantLen)
		}
		img, err := png.Decode(bytes.NewReader(got))
		if err != nil {
			t.Fatalf("total %d: %v", total, err)
		}
		if b := img.Bounds(); b.Dx() != 7 || b.Dy() != 3 {
			t.Fatalf("bounds %v", b)
		}
	}
	f(0, len(base))
	f(len(base)+pngPadOverhead-1, len(base)) // no room for the chunk
	f(len(base)+pngPadOverhead, len(base)+pngPadOverhead)
	f(len(base)+pngPadOverhead+1, len(base)+pngPadOverhead+1)
	f(1<<20, 1<<20)
}

func TestSniffImage(t *testing.T) {
	f := func(b []byte, want string) {
		t.Helper()
		if got := SniffImage(b); got != want {
			t.Fatalf("SniffImage(%q) = %q, want %q", b, got, want)
		}
	}
	f(makePNG(1, 1, ""), "image/png")
	f([]byte{0xff, 0xd8, 0xff, 0xe0}, "image/jpeg")
	f([]byte("GIF89a...."), "image/gif")
	f([]byte("RIFF\x00\x00\x00\x00WEBPVP8 "), "image/webp")
	f([]byte("RIFF\x00\x00\x00\x00WAVE"), "")
	f(nil, "")
}

func TestScaleDims(t *testing.T) {
	f := func(w, h, wantW, wantH int) {
		t.Helper()
		if gw, gh := scaleDims(w, h, 64); gw != wantW || gh != wantH {
			t.Fatalf("scaleDims(%d, %d) = %d, %d; want %d, %d", w, h, gw, gh, wantW, wantH)
		}
	}
	f(1024, 1024, 64, 64)
	f(1536, 1024, 64, 42)
	f(1024, 1536, 42, 64)
	f(4096, 1, 64, 1)
	f(32, 16, 32, 16)
}
