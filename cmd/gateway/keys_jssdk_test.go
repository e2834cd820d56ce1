package main

import (
	"os"
	"os/exec"
	"testing"
)

// TestJSSDKAdminKey runs jsDir's keys.mjs: the official openai package succeeds with a
// key made through the admin API, and gets the beta family's 401 once the key is revoked
// through the same API.
func TestJSSDKAdminKey(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the JS SDK tests install packages and start node")
	}
	node := installJS(t)
	e := newEnv(t)
	e.writeConfig("", "admin:\n  tokens: [{id: ops, key: "+adminTok+"}]\n")
	g := e.start()
	k := adminCall(t, g, "POST", "/admin/v1/keys", `{"name":"js","models":["old-model"]}`, 201)
	id, secret := k["id"].(string), k["key"].(string)
	keysJS := func(want string) {
		t.Helper()
		run := exec.Command(node, "keys.mjs")
		run.Dir = jsDir
		run.Env = append(os.Environ(), "GATEWAY_URL="+g.base, "GATEWAY_KEY="+secret,
			"GATEWAY_CHAT_MODEL=old-model", "GATEWAY_WANT="+want, "NO_COLOR=1")
		out, err := run.CombinedOutput()
		if err != nil {
			t.Fatalf("node keys.mjs, want %s: %v\n%s\ngateway log:\n%s", want, err, out, g.stderr.String())
		}
		t.Logf("%s", out)
	}
	keysJS("200")
	adminCall(t, g, "DELETE", "/admin/v1/keys/"+id, "", 200)
	keysJS("401")
}
