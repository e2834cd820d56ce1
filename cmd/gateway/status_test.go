package main

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatusPageInChromium renders the admin listener's status page in a real
// headless Chromium (Debian's chromium, installed by .ci/apt-install when
// missing): the DOM it builds holds every deployment of the demo with its
// state and no key, and its screenshot is a PNG of the window's size that is
// not blank. It skips only when the package cannot be installed.
func TestStatusPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a browser")
	}
	chromium := needTool(t, "chromium", "chromium")
	g := launch(t, t.TempDir(), []string{"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-log-format", "json", "-access-log", "off"}, nil)
	for range 5 {
		if status := chatCall(t, g.base, demoKey); status != 200 {
			t.Fatalf("chat: %d", status)
		}
	}
	dir := t.TempDir()
	browse := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(chromium, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
			"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir=" + filepath.Join(dir, "profile"), "--window-size=1200,900"}, args...)...)
		cmd.Dir = dir
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, errOut.String())
		}
		return out.Bytes()
	}
	dom := string(browse("--dump-dom", g.admin+"/status"))
	for _, dep := range []string{"sim-a-alpha", "sim-a-beta", "sim-a-gamma", "sim-b-alpha", "sim-b-beta", "sim-b-gamma"} {
		if !strings.Contains(dom, `data-name="`+dep+`" data-state="healthy"`) {
			t.Errorf("the rendered DOM has no healthy row for %s:\n%s", dep, dom)
		}
	}
	if !strings.Contains(dom, "<title>modelgate status</title>") || !strings.Contains(dom, testVersion) {
		t.Errorf("title or version missing:\n%s", dom)
	}
	for _, secret := range []string{demoKey, "sim-alpha", "sim-beta", "sim-gamma", "127.0.0.1"} {
		if strings.Contains(dom, secret) {
			t.Errorf("the page shows %q", secret)
		}
	}

	shot := filepath.Join(dir, "status.png")
	browse("--screenshot="+shot, g.admin+"/status")
	checkScreenshot(t, shot, 1200, 900)
}

// checkScreenshot decodes the PNG at path and checks its size and that it is
// not blank: a rendered table, badges and text give many distinct colours.
func checkScreenshot(t *testing.T, path string, w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b != image.Rect(0, 0, w, h) {
		t.Fatalf("screenshot is %v; want %dx%d", b, w, h)
	}
	colours := map[[4]uint32]int{}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			r, g, b, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, b, a}]++
		}
	}
	// The page's own colours: background, white tables, dark header row,
	// green badges, text with anti-aliasing.
	if len(colours) < 50 {
		t.Fatalf("screenshot has %d distinct colours: blank or unstyled", len(colours))
	}
	var top int
	for _, n := range colours {
		top = max(top, n)
	}
	if top > w*h*95/100 {
		t.Fatalf("one colour covers %d of %d pixels: blank", top, w*h)
	}
	t.Logf("screenshot %dx%d, %d distinct colours, the commonest on %.0f%% of pixels", w, h, len(colours), 100*float64(top)/float64(w*h))
}
