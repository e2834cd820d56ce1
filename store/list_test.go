package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// listFixture is a store holding a few hundred files of two owners, with the same files kept
// in memory as the model that listings are checked against.
type listFixture struct {
	all []File // every file of every owner, ascending by id
	now time.Time
}

const crockfordAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

var listPurposes = []string{"vision", "batch", "assistants"}

func fillListStore(t *testing.T, p Store) *listFixture {
	t.Helper()
	fx := &listFixture{now: t0.Add(150 * time.Minute)}
	for i := range 400 {
		owner := "team-a"
		if i%4 == 3 {
			owner = "team-b"
		}
		f := File{Owner: owner, Filename: fmt.Sprintf("f%03d", i), MimeType: "image/png",
			Purpose: listPurposes[i%len(listPurposes)], Created: t0.Add(time.Duration(i) * time.Minute)}
		switch i % 5 {
		case 0:
			f.Expires = t0.Add(time.Duration(i) * time.Minute) // some expired at fx.now
		case 1:
			f.Expires = time.Time{} // never
		default:
			f.Expires = t0.Add(24 * time.Hour)
		}
		fx.all = append(fx.all, putFile(t, p, f, []byte(f.Filename)))
	}
	if !slices.IsSortedFunc(fx.all, func(a, b File) int { return strings.Compare(a.ID, b.ID) }) {
		t.Fatal("file ids are not in creation order")
	}
	return fx
}

// modelList is ListFiles written plainly from the ListQuery contract.
func (fx *listFixture) modelList(owner string, q ListQuery) ([]File, bool) {
	var list []File
	for _, f := range fx.all {
		if f.Owner == owner && !f.Expired(q.Now) && (q.Purpose == "" || f.Purpose == q.Purpose) {
			list = append(list, f)
		}
	}
	if q.Desc {
		slices.Reverse(list)
	}
	// precedes reports whether id a comes before id b in list order.
	precedes := func(a, b string) bool {
		if q.Desc {
			return a > b
		}
		return a < b
	}
	if len(q.IDs) > 0 {
		var page []File
		for _, f := range list {
			if slices.Contains(q.IDs, f.ID) {
				page = append(page, f)
			}
		}
		return page, false
	}
	var sel []File
	for _, f := range list {
		if (q.After == "" || precedes(q.After, f.ID)) && (q.Before == "" || precedes(f.ID, q.Before)) {
			sel = append(sel, f)
		}
	}
	if q.Before != "" && q.After == "" {
		if len(sel) > q.Limit {
			return sel[len(sel)-q.Limit:], true
		}
		return sel, false
	}
	if len(sel) > q.Limit {
		return sel[:q.Limit], true
	}
	return sel, false
}

func (fx *listFixture) check(t *testing.T, p Store, owner string, q ListQuery) []File {
	t.Helper()
	got, more, err := p.ListFiles(owner, q)
	if err != nil {
		t.Fatalf("ListFiles(%s, %+v): %v", owner, q, err)
	}
	want, wantMore := fx.modelList(owner, q)
	if more != wantMore || len(got) != len(want) {
		t.Fatalf("ListFiles(%s, %+v) = %d files, hasMore %v; want %d, %v", owner, q, len(got), more, len(want), wantMore)
	}
	for i := range got {
		sameFile(t, got[i], want[i])
	}
	return got
}

// cursors returns cursor values worth testing: none, visible, expired and foreign ids, ids
// that were never stored (between, before and after all files) and the extremes.
func (fx *listFixture) cursors() []string {
	n := len(fx.all)
	return []string{
		"", fx.all[0].ID, fx.all[1].ID, fx.all[3].ID, fx.all[n/3].ID, fx.all[n/2+5].ID, fx.all[n-1].ID,
		fx.between(n / 2), NewFileID(t0), // never stored: between two files, newer than all
		FileIDPrefix + strings.Repeat("0", 26), FileIDPrefix + "7" + strings.Repeat("Z", 25),
		// Not ids at all: shorter than one, an id with more after it, past every id.
		fx.all[n/2].ID[:20], fx.all[n/2].ID + "0", "~",
	}
}

// between returns an id that was never stored and sorts right after fx.all[k] (or a later one).
func (fx *listFixture) between(k int) string {
	for ; k+1 < len(fx.all); k++ {
		id := fx.all[k].ID
		last := strings.IndexByte(crockfordAlphabet, id[len(id)-1])
		if last+1 == len(crockfordAlphabet) {
			continue
		}
		mid := id[:len(id)-1] + crockfordAlphabet[last+1:last+2]
		if mid < fx.all[k+1].ID {
			return mid
		}
	}
	panic("no gap between stored ids")
}

// checkMatrix checks every limit, purpose and pair of cursors of owner's list in one order.
func (fx *listFixture) checkMatrix(t *testing.T, p Store, owner string, desc bool) {
	cursors := fx.cursors()
	for _, limit := range []int{1, 2, 7, 100} {
		for _, purpose := range []string{"", "batch", "none"} {
			for _, after := range cursors {
				for _, before := range cursors {
					fx.check(t, p, owner, ListQuery{Now: fx.now, Limit: limit, Desc: desc,
						After: after, Before: before, Purpose: purpose})
				}
			}
		}
	}
}

func testListFilesAgainstModel(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{})
	p := e.open()
	fx := fillListStore(t, p)
	// One parallel subtest per owner and order: the store serves them at once, and a
	// pass over a store on the network takes a fraction of the time.
	run := func(p Store, owners ...string) {
		t.Run("pass", func(t *testing.T) {
			for _, owner := range owners {
				for _, desc := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/desc=%v", owner, desc), func(t *testing.T) {
						t.Parallel()
						fx.checkMatrix(t, p, owner, desc)
					})
				}
			}
		})
	}
	if testing.Short() && eng.nativeExpiry {
		run(p, "team-a") // each check is a few round trips: keep -short (and -race) quick
		return
	}
	run(p, "team-a", "team-b", "team-c")
	p = e.reopen(p)
	if eng.nativeExpiry {
		// A reopened Redis store reads what the same server holds: one owner is enough.
		run(p, "team-a")
		return
	}
	run(p, "team-a", "team-b", "team-c")
}

// TestListFilesPaging walks every page both ways and checks that the pages join into the
// whole list, with hasMore false exactly on the last page.
func testListFilesPaging(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{})
	p := e.open()
	fx := fillListStore(t, p)
	run := func(p Store) {
		for _, desc := range []bool{false, true} {
			for _, limit := range []int{1, 13, 100} {
				whole, _ := fx.modelList("team-a", ListQuery{Now: fx.now, Limit: len(fx.all), Desc: desc})
				// Forward with After.
				var walked []File
				q := ListQuery{Now: fx.now, Limit: limit, Desc: desc}
				for pages := 0; ; pages++ {
					page := fx.check(t, p, "team-a", q)
					walked = append(walked, page...)
					if _, more, _ := p.ListFiles("team-a", q); !more {
						break
					}
					if pages > len(fx.all) {
						t.Fatal("paging does not end")
					}
					q.After = page[len(page)-1].ID
				}
				if len(walked) != len(whole) {
					t.Fatalf("desc=%v limit=%d: After pages hold %d files, want %d", desc, limit, len(walked), len(whole))
				}
				// Backward with Before, starting past the last file.
				var back []File
				q = ListQuery{Now: fx.now, Limit: limit, Desc: desc, Before: whole[len(whole)-1].ID}
				back = append(back, whole[len(whole)-1])
				for {
					page, more, err := p.ListFiles("team-a", q)
					if err != nil {
						t.Fatal(err)
					}
					back = append(slices.Clone(page), back...)
					if !more {
						break
					}
					q.Before = page[0].ID
				}
				for i := range whole {
					if back[i].ID != whole[i].ID {
						t.Fatalf("desc=%v limit=%d: Before pages differ at %d", desc, limit, i)
					}
				}
			}
		}
	}
	run(p)
	p = e.reopen(p)
	run(p)
}

func testListFilesIDs(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{})
	p := e.open()
	fx := fillListStore(t, p)
	rng := rand.New(rand.NewPCG(1, 2))
	run := func(p Store) {
		for range 200 {
			var ids []string
			for range 1 + rng.IntN(60) {
				switch rng.IntN(10) {
				case 0:
					ids = append(ids, "file_svc_bogus")
				case 1:
					ids = append(ids, NewFileID(t0)) // never stored
				default:
					ids = append(ids, fx.all[rng.IntN(len(fx.all))].ID) // any owner, maybe expired
				}
			}
			ids = append(ids, ids[:rng.IntN(len(ids))]...) // duplicates
			q := ListQuery{Now: fx.now, Desc: rng.IntN(2) == 0, IDs: ids}
			if rng.IntN(3) == 0 {
				q.Purpose = "vision"
			}
			fx.check(t, p, "team-a", q)
		}
	}
	run(p)
	p = e.reopen(p)
	run(p)

	many := make([]string, MaxListLimit+1)
	for i := range many {
		many[i] = NewFileID(t0)
	}
	if _, _, err := p.ListFiles("team-a", ListQuery{IDs: many}); err == nil {
		t.Fatalf("ListFiles accepted %d ids", len(many))
	}
	if _, _, err := p.ListFiles("team-a", ListQuery{IDs: append(many[:MaxListLimit:MaxListLimit], many[0])}); err != nil {
		t.Fatalf("ListFiles(%d ids after deduplication): %v", MaxListLimit, err)
	}
}

func testListFilesLimit(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{})
	p := e.open()
	for _, limit := range []int{-1, 0, MaxListLimit + 1} {
		if _, _, err := p.ListFiles("team-a", ListQuery{Limit: limit}); err == nil {
			t.Fatalf("ListFiles accepted limit %d", limit)
		}
	}
}
