package proxy

import (
	"runtime"

	"github.com/modelgate/gateway/proxy/resume"
)

// resumers run the held streams' steps (see package resume): up to
// 2*GOMAXPROCS at once, 4 at least, before a step waits for one.
var resumers = resume.New(max(4, 2*runtime.GOMAXPROCS(0)))

// resumeStream has hs's next step run on a resumer, without waiting.
func resumeStream(hs *heldStream) { resumers.Add(hs) }

// Step is hs's step on a resumer.
func (hs *heldStream) Step() { hs.writeStream() }
