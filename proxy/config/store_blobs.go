package config

import (
	"fmt"
	"strings"

	"github.com/modelgate/gateway/store"
)

// StoreBlobs is the object storage of file bytes (store.blobs): an S3-compatible service.
// The keys are read from the environment variables it names, when the file is loaded.
type StoreBlobs struct {
	Engine   string `yaml:"engine"`   // "s3"
	Endpoint string `yaml:"endpoint"` // http(s)://host[:port]
	Bucket   string `yaml:"bucket"`   // must exist
	Region   string `yaml:"region"`   // empty: asked of the service
	Prefix   string `yaml:"prefix"`   // before every object name
	// AccessKeyEnv and SecretKeyEnv name the environment variables of the keys.
	AccessKeyEnv string `yaml:"access_key_env"`
	SecretKeyEnv string `yaml:"secret_key_env"`
	// PathStyle addresses the bucket in the path, as most self-hosted services want.
	PathStyle bool      `yaml:"path_style"`
	TLS       *StoreTLS `yaml:"tls"` // for an https endpoint; nil: the system's roots

	accessKey, secretKey string // resolved from the environment
}

// resolveBlobKeys reads the keys named by AccessKeyEnv and SecretKeyEnv, before validation.
func (p *problems) resolveBlobKeys(b *StoreBlobs, lookup func(string) (string, bool)) {
	for _, k := range []struct {
		field, env string
		dst        *string
	}{{"access_key_env", b.AccessKeyEnv, &b.accessKey}, {"secret_key_env", b.SecretKeyEnv, &b.secretKey}} {
		if k.env == "" {
			p.add("store.blobs."+k.field, "required: the environment variable that holds the key")
			continue
		}
		v, ok := lookup(k.env)
		if !ok || v == "" {
			p.add("store.blobs."+k.field, "environment variable %s is not set", k.env)
			continue
		}
		*k.dst = v
	}
}

// blobs checks the store.blobs section. No message quotes a key.
func (p *problems) blobs(b *StoreBlobs) {
	if b.Engine != "s3" {
		p.add("store.blobs.engine", "unsupported engine %q (supported: s3)", b.Engine)
	}
	o := store.S3Options{Endpoint: b.Endpoint, Bucket: b.Bucket, AccessKey: "k", SecretKey: "k"}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		switch {
		case b.Endpoint == "" || strings.Contains(err.Error(), "Endpoint"):
			p.add("store.blobs.endpoint", "expected http(s)://host[:port] such as https://s3.eu-west-1.amazonaws.com, not %q", b.Endpoint)
		default:
			p.add("store.blobs.bucket", "required: the bucket that holds the files' bytes")
		}
	}
	if b.TLS != nil {
		if !strings.HasPrefix(b.Endpoint, "https://") {
			p.add("store.blobs.tls", "only for an https endpoint")
		} else if _, err := b.TLS.Config(); err != nil {
			p.add("store.blobs.tls", "%v", err)
		}
	}
}

// S3Options returns the options of the object storage of b, which passed validation.
func (b *StoreBlobs) S3Options() (store.S3Options, error) {
	o := store.S3Options{Endpoint: b.Endpoint, Bucket: b.Bucket, Region: b.Region, Prefix: b.Prefix,
		AccessKey: b.accessKey, SecretKey: b.secretKey, PathStyle: b.PathStyle}
	if b.TLS != nil {
		c, err := b.TLS.Config()
		if err != nil {
			return o, fmt.Errorf("store.blobs.tls: %w", err)
		}
		o.TLS = c
	}
	return o, nil
}
