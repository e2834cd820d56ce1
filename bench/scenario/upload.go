package scenario

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"mime/multipart"
	"net/textproto"
	"sync"
)

// uploadBoundary is the multipart boundary of the upload body.
const uploadBoundary = "modelgate-bench-6a1f0c2e9d"

// uploadBody returns the multipart body of the upload scenario and its
// content type: one file field holding a valid PNG of exactly UploadBytes, as
// anthropic-sdk-go sends a file upload. Built once; callers must not modify it.
var uploadBody = sync.OnceValues(func() ([]byte, string) { return uploadBodyOf(UploadBytes) })

// uploadBodyOf returns the multipart body of an upload of a PNG of exactly
// size bytes, and its content type.
func uploadBodyOf(size int) ([]byte, string) {
	var b bytes.Buffer
	b.Grow(size + 1024)
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(uploadBoundary); err != nil {
		panic("BUG: bad multipart boundary: " + err.Error())
	}
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", `form-data; name="file"; filename="bench.png"`)
	h.Set("Content-Type", "image/png")
	part, err := w.CreatePart(h)
	if err != nil {
		panic("BUG: cannot build the upload body: " + err.Error())
	}
	_, _ = part.Write(paddedPNG(size))
	if err := w.Close(); err != nil {
		panic("BUG: cannot build the upload body: " + err.Error())
	}
	return b.Bytes(), w.FormDataContentType()
}

// paddedPNG returns a valid 16x16 PNG of exactly size bytes: a private
// ancillary chunk (bnCh) before IEND carries the padding. The padding is
// pseudo-random, fixed by its seed: a real image of that size is mostly
// deflate-compressed pixel data, which no block compressor shrinks. A run of
// one byte would instead be the worst case of the store's block compression:
// decompressing it at each compaction took a quarter of the gateway's CPU in
// this scenario.
func paddedPNG(size int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 16, 16))
	for i := range 16 {
		img.Set(i, i, color.NRGBA{R: 200, G: 80, B: 20, A: 255})
	}
	var small bytes.Buffer
	if err := png.Encode(&small, img); err != nil {
		panic("BUG: cannot encode a PNG: " + err.Error())
	}
	const chunkOverhead = 12 // length, type, CRC
	iend := small.Len() - chunkOverhead
	pad := size - small.Len() - chunkOverhead
	if pad < 0 {
		panic("BUG: PNG size below its minimum")
	}
	out := make([]byte, 0, size)
	out = append(out, small.Bytes()[:iend]...)
	out = binary.BigEndian.AppendUint32(out, uint32(pad))
	start := len(out)
	out = append(out, "bnCh"...) // ancillary, private, safe to copy: decoders skip it
	rng := rand.New(rand.NewPCG(0x6d67, 0x706e67))
	for range pad / 8 {
		out = binary.LittleEndian.AppendUint64(out, rng.Uint64())
	}
	for range pad % 8 {
		out = append(out, byte(rng.Uint64()))
	}
	out = binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(out[start:]))
	return append(out, small.Bytes()[iend:]...)
}
