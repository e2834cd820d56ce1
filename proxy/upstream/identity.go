package upstream

import (
	"sync"

	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/family"
)

// identityScanners holds the scanners of the streams whose id and model are
// read (ReadIdentity): a relay holds one only while such a stream is relayed.
var identityScanners = sync.Pool{New: func() any { return new(parse.IdentityScanner) }}

// ReadIdentity makes r read the answer's id and model from the events of the
// SSE stream that the next Stream relays, as it relays them (see
// parse.IdentityScanner): for traces. A relay not asked pays one nil check
// per read.
func (r *Relay) ReadIdentity() { r.identWanted = true }

// Identity returns the id and model the streamed answer carried, each nil
// when it was not read or not found. They are valid until Reset.
func (r *Relay) Identity() (id, model []byte) {
	if r.ident == nil {
		return nil, nil
	}
	return r.ident.Identity()
}

// beginIdentity starts the read ReadIdentity asked for, on an SSE stream of
// family fam (a Responses stream when responses is set).
func (r *Relay) beginIdentity(fam family.Family, responses bool) {
	if !r.identWanted || !r.sse {
		return
	}
	if r.ident == nil {
		r.ident = identityScanners.Get().(*parse.IdentityScanner)
	}
	r.ident.Reset(identityKeys(fam, responses))
}

// endIdentity gives the scanner back, if r holds one.
func (r *Relay) endIdentity() {
	if r.ident != nil {
		identityScanners.Put(r.ident)
		r.ident = nil
	}
	r.identWanted = false
}

// identityKeys says where the streams of family fam carry the answer's id
// and model: a chat chunk's top-level id and model, the response object of
// Responses' response.created, the message of Messages' message_start, a
// gamma chunk's responseId and modelVersion.
func identityKeys(fam family.Family, responses bool) parse.IdentityKeys {
	switch {
	case responses:
		return parse.IdentityKeys{In: "response", ID: "id", Model: "model"}
	case fam == family.Alpha:
		return parse.IdentityKeys{In: "message", ID: "id", Model: "model"}
	case fam == family.Gamma:
		return parse.IdentityKeys{ID: "responseId", Model: "modelVersion"}
	}
	return parse.IdentityKeys{ID: "id", Model: "model"}
}
