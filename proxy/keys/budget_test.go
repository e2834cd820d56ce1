package keys

import (
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/config"
)

// A record written before keys had budgets decodes as a key without one; a record with
// budgets hands them to the ledger through the snapshot, as the config's keys do.
func TestRecordBudgets(t *testing.T) {
	const digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	old := `{"id":"k-old","name":"x","sha256":"` + digest + `","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","models":["chat-*"]}`
	r, err := Decode("k-old", []byte(old))
	if err != nil || r.Budget != nil || r.Budgets != nil {
		t.Fatalf("an old record: %+v %v", r, err)
	}
	if e := EntryOf(r); e.Budget != nil || e.Budgets != nil {
		t.Fatalf("an old record's entry: %+v", e)
	}

	withBudget := Record{ID: "k-new", Digest: DigestOf("new-secret"), Budget: &Budget{USD: "0.25", Period: "week"}, Budgets: []string{"ops"}}
	r, err = Decode("k-new", withBudget.Encode())
	if err != nil {
		t.Fatal(err)
	}
	e := EntryOf(r)
	if e.Budget == nil || *e.Budget != (config.KeyBudget{USD: 25e10, Period: "week"}) || len(e.Budgets) != 1 {
		t.Fatalf("entry: %+v", e)
	}
	seed := []config.Key{{ID: "cfg", Key: "cfg-secret", Budgets: []string{"ops"}}, {ID: "plain", Key: "plain-secret"}}
	s := Build(seed, map[string]*Entry{"k-new": e, "k-old": EntryOf(&Record{ID: "k-old", Digest: digest})}, 1, time.Time{})
	got := s.Budgets()
	if len(got) != 2 || got[0].ID != "cfg" || got[1].ID != "k-new" || got[1].Budget.USD != 25e10 {
		t.Fatalf("the snapshot's budgets: %+v", got)
	}

	for _, bad := range []*Budget{{USD: "x"}, {USD: "1", Period: "year"}} {
		r := Record{ID: "k-bad", Digest: DigestOf("s"), Budget: bad}
		if _, err := Decode("k-bad", r.Encode()); err == nil {
			t.Errorf("a record with budget %+v decodes", bad)
		}
	}
}
