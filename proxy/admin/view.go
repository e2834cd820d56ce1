package admin

import (
	"time"

	"github.com/modelgate/gateway/proxy/keys"
)

// keyView is a key as the API shows it: never a secret nor a digest.
type keyView struct {
	ID        string            `json:"id"`
	Source    string            `json:"source"`
	Name      string            `json:"name,omitempty"`
	CreatedAt *time.Time        `json:"created_at,omitempty"`
	UpdatedAt *time.Time        `json:"updated_at,omitempty"`
	ExpiresAt *time.Time        `json:"expires_at,omitempty"`
	Blocked   bool              `json:"blocked"`
	Models    []string          `json:"models,omitempty"`
	Limits    *keys.Limits      `json:"limits,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Budget    *keys.Budget      `json:"budget,omitempty"`
	Budgets   []string          `json:"budgets,omitempty"`
	// PreviousUntil are the times the earlier secrets of a rotation stop working.
	PreviousUntil []time.Time `json:"previous_secrets_until,omitempty"`
	// Key is the secret, in the answer of a create or a rotation only.
	Key string `json:"key,omitempty"`
}

type listView struct {
	Data    []keyView `json:"data"`
	HasMore bool      `json:"has_more"`
	LastID  string    `json:"last_id,omitempty"`
}

func view(e *keys.Entry) keyView {
	v := keyView{ID: e.ID, Source: e.Source.String(), Limits: keys.LimitsOf(e.Limits), Budget: keys.BudgetOf(e.Budget), Budgets: e.Budgets}
	r := e.Record
	if r == nil {
		return v
	}
	v.Name, v.Blocked, v.Models, v.Metadata, v.ExpiresAt = r.Name, r.Blocked, r.Models, r.Metadata, r.ExpiresAt
	v.CreatedAt, v.UpdatedAt = &r.CreatedAt, &r.UpdatedAt
	for _, p := range r.Previous {
		v.PreviousUntil = append(v.PreviousUntil, p.Until)
	}
	return v
}

func viewWithSecret(e *keys.Entry, secret string) keyView {
	v := view(e)
	v.Key = secret
	return v
}

// nameOf is the name a listing filters on: a stored key's name, a config key's id.
func nameOf(e *keys.Entry) string {
	if e.Record != nil {
		return e.Record.Name
	}
	return e.ID
}
