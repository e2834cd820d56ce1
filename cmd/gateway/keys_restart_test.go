package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// keyWant is a secret and the status a call with it must get once every acknowledged
// change is in force: 200, or 401 for a key revoked, blocked or rotated away.
type keyWant struct {
	id, what, secret string
	status           int
}

// adminTry calls g's admin API with the admin token and returns the answer, or an error
// when its status is not want; for goroutines, which may not stop the test.
func adminTry(g *gateway, method, path, body string, want int) (map[string]any, error) {
	req, err := http.NewRequest(method, g.admin+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s on %s: %w", method, path, g.admin, err)
	}
	defer resp.Body.Close()
	var v map[string]any
	err = json.NewDecoder(resp.Body).Decode(&v)
	if resp.StatusCode != want || err != nil {
		return nil, fmt.Errorf("%s %s on %s: %d %v %v, want %d", method, path, g.admin, resp.StatusCode, v, err, want)
	}
	return v, nil
}

// keysBurst makes changes through g until it has n secrets to check, and returns what
// each must then get. Each key it makes is changed again, in turn: deleted, blocked,
// blocked and unblocked, rotated without overlap, or left alone. Every change is
// acknowledged, or keysBurst returns the error.
func keysBurst(g *gateway, tag string, n int) ([]keyWant, error) {
	var wants []keyWant
	for i := 0; len(wants) < n; i++ {
		k, err := adminTry(g, "POST", "/admin/v1/keys", fmt.Sprintf(`{"name":"%s-%d"}`, tag, i), 201)
		if err != nil {
			return nil, err
		}
		id, secret := k["id"].(string), k["key"].(string)
		w := keyWant{id: id, what: fmt.Sprintf("%s (%s-%d)", id, tag, i), secret: secret, status: 200}
		change := func(method, path, body string) (map[string]any, error) {
			return adminTry(g, method, "/admin/v1/keys/"+id+path, body, 200)
		}
		switch i % 5 {
		case 0:
			_, err = change("DELETE", "", "")
			w.what, w.status = w.what+" made then deleted", 401
		case 1:
			_, err = change("POST", "/block", "")
			w.what, w.status = w.what+" made then blocked", 401
		case 2:
			if _, err = change("POST", "/block", ""); err == nil {
				_, err = change("POST", "/unblock", "")
			}
			w.what += " blocked then unblocked"
		case 3:
			var r map[string]any
			if r, err = change("POST", "/rotate", `{"overlap":"0s"}`); err == nil {
				wants = append(wants, keyWant{id: id, what: w.what + " new secret", secret: r["key"].(string), status: 200})
			}
			w.what, w.status = w.what+" old secret, rotated without overlap", 401
		default:
			w.what += " made"
		}
		if err != nil {
			return nil, err
		}
		wants = append(wants, w)
	}
	return wants, nil
}

// TestKeysNodeRestartCatchesUp: node C is killed (SIGKILL) while A and B make a burst of
// key changes; when C starts again, every change acknowledged while it was down is in
// force on it from its first answer: C reads the whole set before it serves.
func TestKeysNodeRestartCatchesUp(t *testing.T) {
	nodes, _ := keysCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	config := c.cmd.Args[slices.Index(c.cmd.Args, "-config")+1]

	// Keys C knew before it went down: half of them are revoked while it is.
	var old []keyWant
	for i := range 10 {
		k := adminCall(t, a, "POST", "/admin/v1/keys", fmt.Sprintf(`{"name":"old-%d"}`, i), 201)
		old = append(old, keyWant{id: k["id"].(string), what: k["id"].(string) + " made before", secret: k["key"].(string), status: 200})
	}
	for _, k := range old {
		untilStatus(t, c, k.secret, 200, time.Now())
	}
	c.cmd.Process.Kill()
	<-c.exited

	var mu sync.Mutex
	var wants []keyWant
	var errs []error
	var wg sync.WaitGroup
	for i, g := range []*gateway{a, b} {
		wg.Go(func() {
			w, err := keysBurst(g, fmt.Sprintf("burst%d", i), 100)
			mu.Lock()
			defer mu.Unlock()
			wants, errs = append(wants, w...), append(errs, err)
		})
	}
	wg.Go(func() {
		for i := range old {
			if i%2 == 0 {
				_, err := adminTry(b, "DELETE", "/admin/v1/keys/"+old[i].id, "", 200)
				old[i].what, old[i].status = old[i].what+", deleted while down", 401
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	wants = append(wants, old...)

	// C's client listener on a known address, so that a probe can call it from the
	// moment it accepts, before C says that it listens: even its first answer must be true.
	addr := freeAddr(t)
	first := wants[slices.IndexFunc(wants, func(w keyWant) bool { return strings.HasSuffix(w.what, " made") })]
	probed := make(chan int, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		client := &http.Client{Timeout: 10 * time.Second}
		for {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest("GET", "http://"+addr+"/v1/models", nil)
			req.Header.Set("Authorization", "Bearer "+first.secret)
			resp, err := client.Do(req)
			if err != nil {
				time.Sleep(time.Millisecond) // not accepting yet
				continue
			}
			resp.Body.Close()
			probed <- resp.StatusCode
			return
		}
	}()
	c2 := launch(t, "", []string{"-config", config, "-listen", addr, "-log-format", "json",
		"-access-log", "off", "-admin-listen", "127.0.0.1:0"}, nil)
	select {
	case status := <-probed:
		if status != 200 {
			t.Fatalf("the restarted node's first answer to %s: %d, want 200", first.what, status)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer to the probe 30s after the restarted node listens")
	}
	var wrong []string
	for _, w := range wants {
		if got := modelsStatus(t, c2, w.secret); got != w.status {
			wrong = append(wrong, fmt.Sprintf("%s: %d, want %d", w.what, got, w.status))
		}
	}
	if len(wrong) > 0 {
		t.Fatalf("right after its start, %d of %d acknowledged changes are not in force on the restarted node, the first: %v",
			len(wrong), len(wants), wrong[:min(5, len(wrong))])
	}
	t.Logf("%d keys changed while the node was down, every change in force on it from its first answer", len(wants))
}
