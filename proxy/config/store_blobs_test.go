package config

import (
	"strings"
	"testing"
)

const blobsBase = "keys:\n  - {id: a, key: topsecret}\nupstreams:\n" +
	"  - {name: u1, family: beta, base_url: \"http://127.0.0.1:1/v1\", api_key: topsecret}\n" +
	"models:\n  - {id: m, upstreams: [u1]}\n"

// store.blobs becomes the options of the object storage, with the keys read from the
// environment, beside either engine.
func TestStoreBlobsOptions(t *testing.T) {
	for _, engine := range []string{"engine: redis, addrs: [\"h:1\"]", "engine: pebble"} {
		y := blobsBase + "store: {" + engine + ", blobs: {engine: s3, endpoint: \"https://s3.example:9000\", bucket: files, region: eu-1, " +
			"prefix: gw/, access_key_env: S3A, secret_key_env: S3S, path_style: true}}\n"
		cfg, err := Parse([]byte(y), env(map[string]string{"S3A": "akey", "S3S": "skey"}))
		if err != nil {
			t.Fatalf("%s: %v", engine, err)
		}
		o, err := cfg.Store.Blobs.S3Options()
		if err != nil {
			t.Fatal(err)
		}
		if o.Endpoint != "https://s3.example:9000" || o.Bucket != "files" || o.Region != "eu-1" || o.Prefix != "gw/" ||
			o.AccessKey != "akey" || o.SecretKey != "skey" || !o.PathStyle {
			t.Fatalf("%s: options %+v", engine, o)
		}
	}
}

// Every error of store.blobs names its field and quotes no key.
func TestStoreBlobsValidation(t *testing.T) {
	f := func(blobs, wantField string) {
		t.Helper()
		y := blobsBase + "store: {engine: redis, addrs: [\"h:1\"], blobs: {" + blobs + "}}\n"
		_, err := Parse([]byte(y), env(map[string]string{"S3A": "topsecret", "S3S": "topsecret"}))
		if err == nil || !strings.Contains(err.Error(), wantField) {
			t.Fatalf("%s: error %v does not name %s", blobs, err, wantField)
		}
		if strings.Contains(err.Error(), "topsecret") {
			t.Fatalf("error leaks a key: %q", err)
		}
	}
	ok := "access_key_env: S3A, secret_key_env: S3S, "
	f(ok+"engine: gcs, endpoint: \"http://h:1\", bucket: b", "store.blobs.engine")
	f(ok+"engine: s3, bucket: b", "store.blobs.endpoint")
	f(ok+"engine: s3, endpoint: \"ftp://h:1\", bucket: b", "store.blobs.endpoint")
	f(ok+"engine: s3, endpoint: \"http://h:1/path\", bucket: b", "store.blobs.endpoint")
	f(ok+"engine: s3, endpoint: \"http://h:1\"", "store.blobs.bucket")
	f(ok+"engine: s3, endpoint: \"http://h:1\", bucket: b, tls: {ca_file: /x.pem}", "store.blobs.tls")
	f(ok+"engine: s3, endpoint: \"https://h:1\", bucket: b, tls: {ca_file: /nonexistent.pem}", "store.blobs.tls")
	f("secret_key_env: S3S, engine: s3, endpoint: \"http://h:1\", bucket: b", "store.blobs.access_key_env")
	f("access_key_env: S3A, secret_key_env: NOPE_UNSET, engine: s3, endpoint: \"http://h:1\", bucket: b", "store.blobs.secret_key_env")
	f(ok+"engine: s3, endpoint: \"http://h:1\", bucket: b, acces_key: x", "acces_key")
}
