package scenario

import (
	"context"
	"fmt"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"

	"github.com/modelgate/gateway/bench/load"
)

var responsesRequest = request{fam: beta, gatewayPath: "/v1/router/beta/v1/responses", simPath: "/v1/responses",
	body: []byte(responsesBody)}

func responsesCreate(o load.Options) Scenario {
	return Scenario{
		Name: "responses-create",
		Description: fmt.Sprintf("Responses create, not streamed; the gateway records who owns each new response. "+
			"Closed loop over %d connections.", o.Connections),
		Load:     o,
		Stateful: true,
		build:    fixed(responsesRequest),
	}
}

// responsesRetrieve reads, in turn, RetrieveIDs responses it created through
// the same target first: the gateway finds each one's owner and deployment.
func responsesRetrieve(o load.Options) Scenario {
	return Scenario{
		Name: "responses-retrieve",
		Description: fmt.Sprintf("Responses retrieve (GET by id) of %d responses created through the same target just before; "+
			"the gateway looks up each one's owner and deployment. Closed loop over %d connections.", RetrieveIDs, o.Connections),
		Load:     o,
		Stateful: true,
		build: func(ctx context.Context, env *Env, t *Target) (*load.Spec, error) {
			create := responsesRequest.spec(env, t)
			ids, err := createResponses(ctx, create, RetrieveIDs)
			if err != nil {
				return nil, err
			}
			base := t.URL + responsesRequest.targetPath(t) + "/"
			urls := make([]string, len(ids))
			for i, id := range ids {
				urls[i] = base + id
			}
			s := &load.Spec{Method: fasthttp.MethodGet, URL: urls[0], Headers: append(responsesRequest.auth(env, t), sdkHeaders[beta]...)}
			s.Mutate = func(req *fasthttp.Request, seq uint64) {
				req.SetRequestURI(urls[seq%uint64(len(urls))])
			}
			return s, nil
		},
	}
}

// createResponses sends spec n times and returns the ids of the responses made.
func createResponses(ctx context.Context, spec *load.Spec, n int) ([]string, error) {
	if err := load.CheckLoopback(spec.URL); err != nil {
		return nil, err
	}
	c := &fasthttp.Client{MaxIdemponentCallAttempts: 1, DisablePathNormalizing: true}
	defer c.CloseIdleConnections()
	req := newRequest(spec, 0)
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	var p fastjson.Parser
	ids := make([]string, 0, n)
	for range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := c.DoTimeout(req, resp, DefaultProbeTimeout); err != nil {
			return nil, fmt.Errorf("cannot create a response at %s: %w", spec.URL, err)
		}
		v, err := p.ParseBytes(resp.Body())
		id := ""
		if err == nil {
			id = string(v.GetStringBytes("id"))
		}
		if resp.StatusCode() != fasthttp.StatusOK || id == "" {
			return nil, fmt.Errorf("%w: creating a response at %s answered %d: %.300q",
				ErrProbe, spec.URL, resp.StatusCode(), resp.Body())
		}
		ids = append(ids, id)
	}
	return ids, nil
}
