package main

import "testing"

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
		runScript(t, node, g, "keys.mjs", "GATEWAY_URL="+g.base, "GATEWAY_KEY="+secret,
			"GATEWAY_CHAT_MODEL=old-model", "GATEWAY_WANT="+want)
	}
	keysJS("200")
	adminCall(t, g, "DELETE", "/admin/v1/keys/"+id, "", 200)
	keysJS("401")
}
