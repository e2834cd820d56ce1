package config

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var tlsEnv = env(map[string]string{"KEY_A": "a", "UP": "u"})

// listen_tls with tls parses with its defaults; listen may be off beside it.
func TestParseConfigListenTLS(t *testing.T) {
	cfg, err := Parse([]byte(minimalConfig+"listen: off\nlisten_tls: 0.0.0.0:8443\ntls: {cert_file: c.pem, key_file: k.pem}\n"), tlsEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := ListenerTLS{CertFile: "c.pem", KeyFile: "k.pem", ClientAuth: "none", MinVersion: "1.2", HandshakeTimeout: Duration(10 * time.Second)}
	if cfg.Listen != ListenOff || cfg.ListenTLS != "0.0.0.0:8443" || !reflect.DeepEqual(*cfg.TLS, want) || cfg.TLS.CurveIDs() != nil {
		t.Fatalf("listen %q listen_tls %q tls %+v", cfg.Listen, cfg.ListenTLS, cfg.TLS)
	}
}

// Each mistake of listen, listen_tls and tls is named by its field.
func TestListenTLSValidationNamesField(t *testing.T) {
	f := func(extra, wantField string) {
		t.Helper()
		_, err := Parse([]byte(minimalConfig+extra), tlsEnv)
		if err == nil || !strings.Contains(err.Error(), wantField+": ") {
			t.Fatalf("%q: error %v, want one naming %s", extra, err, wantField)
		}
	}
	f("listen: off\n", "listen")
	f("listen: nowhere\n", "listen")
	f("tls: {cert_file: c, key_file: k}\n", "tls")
	f("listen_tls: 0.0.0.0:8443\n", "tls")
	f("listen_tls: nowhere\ntls: {cert_file: c, key_file: k}\n", "listen_tls")
	f("listen_tls: :8443\ntls: {key_file: k}\n", "tls.cert_file")
	f("listen_tls: :8443\ntls: {cert_file: c}\n", "tls.key_file")
	f("listen_tls: :8443\ntls: {cert_file: c, key_file: k, client_auth: always}\n", "tls.client_auth")
	f("listen_tls: :8443\ntls: {cert_file: c, key_file: k, client_auth: require}\n", "tls.client_ca_file")
	f("listen_tls: :8443\ntls: {cert_file: c, key_file: k, min_version: \"1.1\"}\n", "tls.min_version")
	f("listen_tls: :8443\ntls: {cert_file: c, key_file: k, ciphers: [a]}\n", "tls.ciphers")
}

// tls.curves takes the names Go prints and the common spellings, in any case,
// and keeps their order.
func TestParseConfigTLSCurves(t *testing.T) {
	y := minimalConfig + "listen_tls: :8443\ntls: {cert_file: c, key_file: k, curves: [X25519, x25519mlkem768, P-256, CurveP384, secp521r1, prime256v1x]}\n"
	if _, err := Parse([]byte(y), tlsEnv); err == nil || !strings.Contains(err.Error(), `tls.curves[5]: unknown key exchange "prime256v1x"; known: x25519mlkem768, `) {
		t.Fatalf("error %v", err)
	}
	y = strings.Replace(y, ", prime256v1x", "", 1)
	cfg, err := Parse([]byte(y), tlsEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := []tls.CurveID{tls.X25519, tls.X25519MLKEM768, tls.CurveP256, tls.CurveP384, tls.CurveP521}
	if got := cfg.TLS.CurveIDs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("curves %v, want %v", got, want)
	}
	for _, c := range CurveNames {
		if id, ok := CurveID(strings.ToUpper(c.Name)); !ok || id != c.ID {
			t.Errorf("%s: %v %v", c.Name, id, ok)
		}
		if id, ok := CurveID(c.ID.String()); !ok || id != c.ID {
			t.Errorf("%s as Go prints it (%s): %v %v", c.Name, c.ID, id, ok)
		}
	}
}

// Each mistake of tls.curves is named by its path.
func TestTLSCurvesValidation(t *testing.T) {
	f := func(tlsExtra, wantErr string) {
		t.Helper()
		_, err := Parse([]byte(minimalConfig+"listen_tls: :8443\ntls: {cert_file: c, key_file: k"+tlsExtra+"}\n"), tlsEnv)
		if wantErr == "" {
			if err != nil {
				t.Fatalf("%s: %v", tlsExtra, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%s: error %v, want %q", tlsExtra, err, wantErr)
		}
	}
	f(", curves: [x25519, x448]", `tls.curves[1]: unknown key exchange "x448"; known: x25519mlkem768, secp256r1mlkem768, secp384r1mlkem1024, x25519, p256, p384, p521`)
	f(", curves: [p256, x25519, P-256]", `tls.curves[2]: "P-256" is tls.curves[0] again`)
	f(", curves: []", "tls.curves: empty")
	f(", curves: [x25519mlkem768]", "tls.curves: only post-quantum hybrids, which TLS 1.2 cannot use")
	f(", curves: [x25519mlkem768], min_version: \"1.3\"", "")
	f(", curves: [x25519mlkem768, x25519]", "")
}

// An upstream's tls is for https only, and its files must load.
func TestUpstreamTLSValidation(t *testing.T) {
	f := func(upstream, wantErr string) {
		t.Helper()
		y := "keys: [{id: a, key: k}]\nupstreams:\n  - " + upstream + "\nmodels: [{id: m, upstreams: [u1]}]\n"
		_, err := Parse([]byte(y), tlsEnv)
		if wantErr == "" {
			if err != nil {
				t.Fatalf("%s: %v", upstream, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%s: error %v, want %q", upstream, err, wantErr)
		}
	}
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	f(`{name: u1, family: beta, base_url: "http://h/v1", api_key: x, tls: {server_name: h}}`, "upstreams[0].tls: set for a base_url that is not https")
	f(`{name: u1, family: beta, base_url: "https://h/v1", api_key: x, tls: {ca_file: `+notPEM+`}}`, "upstreams[0].tls: ca_file: no PEM certificate")
	f(`{name: u1, family: beta, base_url: "https://h/v1", api_key: x, tls: {cert_file: c.pem}}`, "upstreams[0].tls: cert_file and key_file go together")
	f(`{name: u1, family: beta, base_url: "https://h/v1", api_key: x, tls: {server_name: h}}`, "")
}

// keys[].client_cert: one of its fields, a client CA to check against, no
// two keys for one certificate.
func TestKeyClientCertValidation(t *testing.T) {
	const tlsOn = "listen_tls: :8443\ntls: {cert_file: c, key_file: k, client_auth: require, client_ca_file: ca}\n"
	f := func(keys, extra, wantErr string) {
		t.Helper()
		y := "keys:\n" + keys + "upstreams: [{name: u1, family: beta, base_url: \"https://h/v1\", api_key: x}]\nmodels: [{id: m, upstreams: [u1]}]\n" + extra
		cfg, err := Parse([]byte(y), tlsEnv)
		if wantErr == "" {
			if err != nil {
				t.Fatalf("%s: %v", keys, err)
			}
			if cfg.Keys[0].ClientCert == nil {
				t.Fatalf("%s: no client_cert", keys)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%s: error %v, want %q", keys, err, wantErr)
		}
	}
	spki := strings.Repeat("ab", 32)
	f("  - {id: a, client_cert: {subject_cn: svc}}\n", tlsOn, "")
	f("  - {id: a, client_cert: {spki_sha256: "+spki+"}}\n", tlsOn, "")
	f("  - {id: a}\n", tlsOn, "keys[0]: one of key, sha256 or client_cert is required")
	f("  - {id: a, client_cert: {}}\n", tlsOn, "keys[0].client_cert: one of subject_cn or spki_sha256 is required")
	f("  - {id: a, client_cert: {subject_cn: s, spki_sha256: "+spki+"}}\n", tlsOn, "keys[0].client_cert: one of subject_cn or spki_sha256")
	f("  - {id: a, client_cert: {spki_sha256: abc}}\n", tlsOn, "keys[0].client_cert.spki_sha256: must be 64 hex digits")
	f("  - {id: a, client_cert: {subject_cn: svc}}\n", "", "keys[0].client_cert: needs listen_tls with tls.client_auth request or require")
	f("  - {id: a, client_cert: {subject_cn: svc}}\n  - {id: b, client_cert: {subject_cn: svc}}\n", tlsOn, "keys[1].client_cert: another key has the same client_cert")
}
