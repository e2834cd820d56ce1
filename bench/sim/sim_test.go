package sim

import (
	"testing"
	"time"
)

const (
	testAlphaKey = "alpha-secret"
	testBetaKey  = "beta-secret"
	testGammaKey = "gamma-secret"
)

// startSim serves a simulator on a loopback port for the duration of the test.
func startSim(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Name == "" {
		o.Name = "east"
	}
	o.AlphaKey, o.BetaKey, o.GammaKey = testAlphaKey, testBetaKey, testGammaKey
	if o.StreamEvents == 0 {
		o.StreamEvents = 5
	}
	s, err := Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fixedClock is the clock of deterministic servers.
func fixedClock() time.Time { return time.Unix(1750000000, 0) }
