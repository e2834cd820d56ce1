package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/load"
)

// Sizes of the slow-deployment scenario.
const (
	// RoutedConnections is its closed-loop concurrency.
	RoutedConnections = 16
	// RoutedFirstByte is both deployments' time to first byte, and
	// SlowFirstByte the slowed one's from the shift on.
	RoutedFirstByte = 5 * time.Millisecond
	SlowFirstByte   = 500 * time.Millisecond
)

// Slow is the mid-round slow-down of a routed scenario: the second of
// Env.Routed answers after SlowFirstByte from At into each round on.
type Slow struct {
	At time.Duration
}

// SlowDown slows the second routed deployment (on) or restores it, through
// the simulator's control endpoint.
func (s *Slow) SlowDown(ctx context.Context, env *Env, on bool) error {
	if len(env.Routed) < 2 {
		return fmt.Errorf("cannot slow a deployment: %d routed deployments", len(env.Routed))
	}
	fault := ""
	if on {
		fault = "first-byte=" + (SlowFirstByte - RoutedFirstByte).String()
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(env.Routed[1] + "/_sim/fault")
	req.Header.SetMethod(fasthttp.MethodPut)
	req.SetBodyString(fault)
	deadline := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := fasthttp.DoDeadline(req, resp, deadline); err != nil {
		return fmt.Errorf("cannot set the fault of %s: %w", env.Routed[1], err)
	}
	if resp.StatusCode() != fasthttp.StatusNoContent {
		return fmt.Errorf("cannot set the fault of %s: %d %s", env.Routed[1], resp.StatusCode(), resp.Body())
	}
	return nil
}

// slowDeployment is the routing issue's case: two deployments of a model
// answer after 5 ms; a third into each round the second's first byte comes
// after 500 ms. Measured from then on: the share of calls each gets, and
// the time to first byte of each and of all.
func slowDeployment(p Params) Scenario {
	r := chatRequest
	r.body = []byte(routedBody)
	r.headers = []load.Header{{Name: "x-sim-latency", Value: RoutedFirstByte.String()}}
	r.check = load.Check{Stream: true}
	at := p.Duration / 3
	return Scenario{
		Name: "slow-deployment",
		Description: fmt.Sprintf("Chat completion, not streamed, without a session, to a model of two simulator deployments "+
			"that answer after %v; %v into each round the second's first byte comes after %v (the simulator's control endpoint), "+
			"and the calls sent from then on are counted by the deployment that answered. The gateway picks by peak-EWMA "+
			"power of two choices (its default); nginx spreads the same two by least_conn. Closed loop over %d connections. "+
			"Each round starts with both fast, and the gateway restarted: it knows nothing of them.",
			RoutedFirstByte, at.Round(time.Millisecond), SlowFirstByte, RoutedConnections),
		Load:   load.Options{Connections: RoutedConnections, Duration: p.Duration},
		Routed: true,
		Slow:   &Slow{At: at},
		build: func(_ context.Context, env *Env, t *Target) (*load.Spec, error) {
			if t.RoutedURL == "" {
				return nil, fmt.Errorf("%s does not spread calls over the routed deployments", t.Name)
			}
			tt := *t
			tt.URL = t.RoutedURL
			s := r.spec(env, &tt)
			s.GroupBy = "x-sim-deployment"
			return s, nil
		},
	}
}
