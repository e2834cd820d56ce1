package sim

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
)

// SniffImage returns the media type of an image by its magic bytes: image/png,
// image/jpeg, image/gif or image/webp; "" when it is none of them.
func SniffImage(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// maxSide bounds the pixels of generated images: the requested aspect is kept,
// the pixel count is small.
const maxSide = 64

// scaleDims scales w×h down so that its longer side is at most side.
func scaleDims(w, h, side int) (int, int) {
	long := max(w, h)
	if long <= side {
		return max(w, 1), max(h, 1)
	}
	return max(1, w*side/long), max(1, h*side/long)
}

type pngKey struct{ w, h int }

// basePNG returns the deployment's generated w×h PNG (cached; do not modify).
func (s *Server) basePNG(w, h int) []byte {
	k := pngKey{w, h}
	if b, ok := s.pngs.Load(k); ok {
		return b.([]byte)
	}
	b := makePNG(w, h, s.o.Name)
	s.pngs.Store(k, b)
	return b
}

// makePNG draws a w×h gradient whose hue depends on name.
func makePNG(w, h int, name string) []byte {
	seed := crc32.ChecksumIEEE([]byte(name))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetNRGBA(x, y, color.NRGBA{
				R: uint8(seed) + uint8(x*255/max(w, 1)),
				G: uint8(seed>>8) + uint8(y*255/max(h, 1)),
				B: uint8(seed >> 16),
				A: 255,
			})
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		panic("BUG: cannot encode a generated PNG: " + err.Error())
	}
	return buf.Bytes()
}

// pngPadOverhead is the size of an empty padding chunk: length, type, keyword, CRC.
const pngPadOverhead = 4 + 4 + len(padKeyword) + 4

const padKeyword = "Comment\x00"

// appendPaddedPNG appends pngData grown to total bytes by a tEXt chunk before IEND,
// an ancillary chunk every decoder skips. When total leaves no room for the
// chunk, pngData is appended as is.
func appendPaddedPNG(dst, pngData []byte, total int) []byte {
	pad := total - len(pngData) - pngPadOverhead
	iend := len(pngData) - 12
	if pad < 0 || iend < 8 {
		return append(dst, pngData...)
	}
	dst = append(dst, pngData[:iend]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(padKeyword)+pad))
	start := len(dst)
	dst = append(dst, "tEXt"+padKeyword...)
	for i := 0; i < pad; i++ {
		dst = append(dst, 'a'+byte(i%26))
	}
	dst = binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:]))
	return append(dst, pngData[iend:]...)
}
