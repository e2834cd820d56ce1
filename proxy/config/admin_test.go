package config

import (
	"strings"
	"testing"
)

func TestAdminTokens(t *testing.T) {
	vars := env(map[string]string{"KEY_A": "caller-secret-0123456789", "UP": "u", "ADMIN": "admin-secret-0123456789"})
	cfg, err := Parse([]byte(minimalConfig+"admin:\n  tokens: [{id: ops, key: \"${ADMIN}\"}]\n  require_token: true\n"), vars)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Admin.Tokens) != 1 || cfg.Admin.Tokens[0].Key != "admin-secret-0123456789" || !cfg.Admin.RequireToken {
		t.Fatalf("admin: %+v", cfg.Admin)
	}
	f := func(admin, wantField string) {
		t.Helper()
		_, err := Parse([]byte(minimalConfig+admin), vars)
		if err == nil || !strings.Contains(err.Error(), wantField) {
			t.Fatalf("%s: %v, want an error naming %s", admin, err, wantField)
		}
	}
	f("admin: {tokens: [{key: admin-secret-0123456789}]}\n", "admin.tokens[0].id")
	f("admin: {tokens: [{id: a, key: short}]}\n", "admin.tokens[0].key")
	f("admin: {tokens: [{id: a, sha256: abc}]}\n", "admin.tokens[0].sha256")
	f("admin: {tokens: [{id: a}]}\n", "admin.tokens[0]")
	f("admin: {tokens: [{id: a, key: admin-secret-0123456789}, {id: a, key: admin-secret-9876543210}]}\n", "admin.tokens[1].id")
	f("admin: {tokens: [{id: a, key: \"${KEY_A}\"}]}\n", "a caller's key")
	f("admin: {require_token: true}\n", "admin.require_token")
	f("admin: {tokens: [{id: a, token: x}]}\n", "admin.tokens[0].token")
}
