package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/gateway/store/redistest"
)

// keysLog is what the admin APIs answered during TestKeysRedisFailover: the final state
// of each key whose every change was acknowledged.
type keysLog struct {
	mu      sync.Mutex
	acked   []keyWant // keys whose changes were all acknowledged
	changes int       // acknowledged changes
	refused int       // changes answered 503 (their key is left out of acked)
	bad     []string  // any other answer
}

func (l *keysLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changes
}

// keysChange makes one change through g's admin API; it returns the answer when the
// change was acknowledged (want), nil when it was refused with a 503, and files
// anything else as bad.
func keysChange(g *gateway, l *keysLog, method, path, body string, want int) map[string]any {
	v, err := adminTry(g, method, path, body, want)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.changes++
		return v
	case strings.Contains(err.Error(), ": 503 "):
		l.refused++
		l.mu.Unlock()
		time.Sleep(20 * time.Millisecond) // a pause, as Retry-After asks, so as not to spin while Redis fails over
		l.mu.Lock()
	default:
		l.bad = append(l.bad, err.Error())
	}
	return nil
}

// keysChurn makes keys through g and changes each once (delete, block, rotate without
// overlap, or none) until stop closes, filing in l each key whose changes were all
// acknowledged with the status its secrets must get.
func keysChurn(g *gateway, tag string, stop <-chan struct{}, l *keysLog) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		k := keysChange(g, l, "POST", "/admin/v1/keys", fmt.Sprintf(`{"name":"%s-%d"}`, tag, i), 201)
		if k == nil {
			continue
		}
		id, secret := k["id"].(string), k["key"].(string)
		w := []keyWant{{id: id, what: fmt.Sprintf("%s (%s-%d) made", id, tag, i), secret: secret, status: 200}}
		var ok map[string]any
		switch i % 4 {
		case 0:
			ok = keysChange(g, l, "DELETE", "/admin/v1/keys/"+id, "", 200)
			w[0].what, w[0].status = w[0].what+" then deleted", 401
		case 1:
			ok = keysChange(g, l, "POST", "/admin/v1/keys/"+id+"/block", "", 200)
			w[0].what, w[0].status = w[0].what+" then blocked", 401
		case 2:
			if ok = keysChange(g, l, "POST", "/admin/v1/keys/"+id+"/rotate", `{"overlap":"0s"}`, 200); ok != nil {
				w[0].what, w[0].status = w[0].what+" then rotated: old secret", 401
				w = append(w, keyWant{id: id, what: fmt.Sprintf("%s (%s-%d) rotated: new secret", id, tag, i),
					secret: ok["key"].(string), status: 200})
			}
		default:
			ok = k
		}
		if ok != nil {
			l.mu.Lock()
			l.acked = append(l.acked, w...)
			l.mu.Unlock()
		}
	}
}

// keysInForce returns what of wants g does not answer as it must.
func keysInForce(g *gateway, wants []keyWant) []string {
	var wrong []string
	for _, w := range wants {
		req, _ := http.NewRequest("GET", g.base+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+w.secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			wrong = append(wrong, fmt.Sprintf("%s on %s: %v", w.what, g.base, err))
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != w.status {
			wrong = append(wrong, fmt.Sprintf("%s on %s: %d, want %d", w.what, g.base, resp.StatusCode, w.status))
		}
	}
	return wrong
}

// TestKeysRedisFailover kills (SIGKILL) the Redis master of the keys while three gateways
// make a burst of key changes through their admin APIs. After the failover every change
// an admin API acknowledged is in force on every node, and every change that failed got
// a 503.
func TestKeysRedisFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a Redis master: not in -short")
	}
	addrs, path := failoverSetup(t)
	appendFile(t, path, fmt.Sprintf("admin:\n  tokens: [{id: ops, key: %s}]\n", adminTok))
	nodes := []*gateway{launchRedis(t, path), launchRedis(t, path), launchRedis(t, path)}
	prefix := prefixOf(t, path)

	l := &keysLog{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, g := range nodes {
		wg.Go(func() { keysChurn(g, fmt.Sprintf("n%d", i), stop, l) })
	}
	eventually(t, func() string { return "first acknowledged changes" }, func() bool { return l.count() >= 60 })
	t.Logf("%d acknowledged changes before the kill", l.count())
	c := failOver(t, addrs, prefix+"{gwkeys}:recs")
	n0 := l.count()
	eventually(t, func() string { return "changes acknowledged after the failover" }, func() bool { return l.count() >= n0+60 })
	close(stop)
	wg.Wait()
	if len(l.bad) > 0 {
		t.Fatalf("%d changes got another answer than an acknowledgement or a 503, the first: %s", len(l.bad), l.bad[0])
	}
	eventually(t, func() string { return "every node sees the cluster ok" }, func() bool { return redistest.AllOK(c) })
	for _, g := range nodes {
		var wrong []string
		eventually(t, func() string {
			return fmt.Sprintf("every acknowledged change in force on %s: %d of %d are not, the first: %v",
				g.base, len(wrong), len(l.acked), wrong[:min(5, len(wrong))])
		}, func() bool {
			wrong = keysInForce(g, l.acked)
			return len(wrong) == 0
		})
	}
	t.Logf("%d acknowledged changes (%d secrets checked) in force on every node after the failover; %d changes answered 503",
		l.changes, len(l.acked), l.refused)
}

// appendFile adds text at the end of the file at path.
func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
