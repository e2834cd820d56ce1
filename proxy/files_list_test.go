package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
)

// TestFilesListOrderAndCursors uploads a few hundred files from concurrent clients and
// pages through them every way both families allow, before and after a restart, with a
// cursor taken before the restart used after it.
func TestFilesListOrderAndCursors(t *testing.T) {
	if testing.Short() {
		t.Skip("uploads a few hundred files")
	}
	e := newEnv(t, nil)
	const n = 260
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				body, ct := multipartBody(filePart(fmt.Sprintf("f%03d.png", i), "", testImage(pngHead, 20+i)))
				status, _, b := e.send("POST", "/v1/router/alpha/v1/files", bearer(keyA), ct, strings.NewReader(string(body)))
				var f alphaFile
				if status != 200 || json.Unmarshal(b, &f) != nil {
					errs <- fmt.Errorf("upload %d: %d %s", i, status, b)
					return
				}
				ids[i] = f.ID
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// ids are ULIDs: their order is the order the gateway created them in
	asc := slices.Clone(ids)
	slices.Sort(asc)
	if len(slices.Compact(slices.Clone(asc))) != n {
		t.Fatal("duplicate file ids")
	}
	desc := slices.Clone(asc)
	slices.Reverse(desc)
	// a file of the other key never shows
	e.mustUpload(keyB, testImage(pngHead, 50))

	check := func(stage string) {
		t.Helper()
		ctx := context.Background()
		cl := e.alphaClient("/alpha", keyA)
		for _, limit := range []int64{1, 7, 100} {
			var got []string
			iter := cl.Files.ListAutoPaging(ctx, anthropic.FileListParams{Limit: anthropic.Int(limit)})
			for iter.Next() && len(got) <= maxPaged {
				got = append(got, iter.Current().ID)
			}
			if iter.Err() != nil || !slices.Equal(got, desc) {
				t.Fatalf("%s: alpha pages of %d: %d files, %v", stage, limit, len(got), iter.Err())
			}
		}
		// default page size: 20
		page, err := cl.Files.List(ctx, anthropic.FileListParams{})
		if err != nil || len(page.Data) != 20 || page.Data[0].ID != desc[0] || page.NextPage != "af1_"+desc[19] {
			t.Fatalf("%s: default page: %d files, next %q, %v", stage, len(page.Data), page.NextPage, err)
		}
		// the older shape, forward with after_id and back with before_id
		var got []string
		after := ""
		for len(got) <= maxPaged {
			l := e.legacyPage(keyA, "limit=33", "after_id", after)
			for _, f := range l.Data {
				got = append(got, f.ID)
			}
			if !*l.HasMore {
				break
			}
			after = *l.LastID
		}
		if !slices.Equal(got, desc) {
			t.Fatalf("%s: after_id pages: %d files", stage, len(got))
		}
		got = got[:0]
		before := asc[0]
		for len(got) <= maxPaged {
			l := e.legacyPage(keyA, "limit=41", "before_id", before)
			page := make([]string, 0, len(l.Data))
			for _, f := range l.Data {
				page = append(page, f.ID)
			}
			got = append(page, got...)
			if !*l.HasMore {
				break
			}
			before = *l.FirstID
		}
		if !slices.Equal(got, desc[:n-1]) {
			t.Fatalf("%s: before_id pages: %d files", stage, len(got))
		}
		// beta, both orders
		bc := e.betaClient(keyA)
		for _, order := range []openai.FileListParamsOrder{"asc", "desc"} {
			want := asc
			if order == "desc" {
				want = desc
			}
			for _, limit := range []int64{0, 13, 100} {
				params := openai.FileListParams{Order: order}
				if limit > 0 {
					params.Limit = openai.Int(limit)
				}
				var got []string
				iter := bc.Files.ListAutoPaging(ctx, params)
				for iter.Next() && len(got) <= maxPaged {
					got = append(got, iter.Current().ID)
				}
				if iter.Err() != nil || !slices.Equal(got, want) {
					t.Fatalf("%s: beta %s pages of %d: %d files, %v", stage, order, limit, len(got), iter.Err())
				}
			}
		}
	}
	check("before restart")
	cursor := "af1_" + desc[149]
	e.restart()
	check("after restart")
	cl := e.alphaClient("/v1/router/alpha", keyA)
	page, err := cl.Files.List(context.Background(), anthropic.FileListParams{Page: anthropic.String(cursor), Limit: anthropic.Int(100)})
	if err != nil || len(page.Data) != 100 || page.Data[0].ID != desc[150] || page.NextPage != "af1_"+desc[249] {
		t.Fatalf("cursor from before the restart: %d files, %v", len(page.Data), err)
	}
	page, err = page.GetNextPage()
	if err != nil || len(page.Data) != n-250 || page.NextPage != "" {
		t.Fatalf("last page: %d files, next %q, %v", len(page.Data), page.NextPage, err)
	}
}

// legacyPage fetches one page of the older alpha list shape, with cursor=value when value
// is set.
func (e *testEnv) legacyPage(key, query, cursor, value string) legacyList {
	e.t.Helper()
	if value != "" {
		query += "&" + cursor + "=" + value
	}
	h := map[string]string{"Authorization": "Bearer " + key, "anthropic-beta": "files-api-2025-04-14"}
	status, _, b := e.send("GET", "/v1/router/alpha/v1/files?"+query, h, "", nil)
	var l legacyList
	if status != 200 || json.Unmarshal(b, &l) != nil || l.HasMore == nil {
		e.t.Fatalf("legacy list %q: %d %s", query, status, b)
	}
	return l
}
