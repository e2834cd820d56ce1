package store

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

func TestCodecRoundTrip(t *testing.T) {
	times := []time.Time{{}, t0, time.Unix(-5, 999999999), time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC),
		time.Date(2030, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600))}
	for _, tm := range times {
		f := File{Filename: "naïve \x00 name.png", MimeType: "image/png", Purpose: "", Size: 1 << 40, Created: tm, Expires: tm.Add(time.Hour)}
		var got File
		if err := decodeFileMeta(appendFileMeta(nil, &f), &got); err != nil {
			t.Fatalf("decodeFileMeta: %v", err)
		}
		sameFile(t, got, f)
		if tm.IsZero() && !got.Created.IsZero() {
			t.Fatalf("zero time came back as %v", got.Created)
		}
		r := Response{Owner: "o", Model: "m", Deployment: "d", Created: tm}
		var gr Response
		if err := decodeResponse(appendResponse(nil, &r), &gr); err != nil {
			t.Fatalf("decodeResponse: %v", err)
		}
		if gr.Owner != r.Owner || gr.Model != r.Model || gr.Deployment != r.Deployment || !gr.Created.Equal(r.Created) {
			t.Fatalf("got %+v, want %+v", gr, r)
		}
	}
}

func TestCodecRejectsDamage(t *testing.T) {
	f := File{Filename: "a", MimeType: "b", Purpose: "c", Size: 3, Created: t0, Expires: t0}
	good := appendFileMeta(nil, &f)
	for n := range len(good) {
		if err := decodeFileMeta(good[:n], new(File)); !errors.Is(err, errCorrupt) {
			t.Fatalf("truncated to %d bytes: error %v", n, err)
		}
	}
	bad := func(name string, b []byte) {
		t.Helper()
		if err := decodeFileMeta(b, new(File)); !errors.Is(err, errCorrupt) {
			t.Fatalf("%s: error %v, want errCorrupt", name, err)
		}
	}
	bad("trailing byte", append(good[:len(good):len(good)], 0))
	bad("version", append([]byte{9}, good[1:]...))
	neg := f
	neg.Size = -1
	bad("negative size", appendFileMeta(nil, &neg))
	nsec := []byte{recordVersion, 0, 0, 0, 0} // three empty strings, size 0
	nsec = binary.AppendVarint(nsec, 0)
	nsec = binary.AppendUvarint(nsec, uint64(time.Second))
	bad("nanoseconds out of range", append(nsec, 0, 0))
}

func FuzzDecodeFileMeta(f *testing.F) {
	f.Add(appendFileMeta(nil, &File{Filename: "a", Size: 1, Created: t0}))
	f.Add([]byte{recordVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var got File
		if err := decodeFileMeta(b, &got); err != nil {
			return
		}
		// Whatever decodes must survive an encode and decode unchanged.
		var again File
		if err := decodeFileMeta(appendFileMeta(nil, &got), &again); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		sameFile(t, again, got)
	})
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(appendResponse(nil, &Response{Owner: "o", Model: "m", Deployment: "d", Created: t0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, again Response
		if err := decodeResponse(b, &got); err != nil {
			return
		}
		if err := decodeResponse(appendResponse(nil, &got), &again); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if again.Owner != got.Owner || again.Model != got.Model || again.Deployment != got.Deployment || !again.Created.Equal(got.Created) {
			t.Fatalf("round trip changed %+v to %+v", got, again)
		}
	})
}
