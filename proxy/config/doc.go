// Package config owns the gateway's routing configuration: its types, the
// loading of one YAML file (${VAR} expanded from the environment, decoded
// strictly so that an unknown field is an error), the defaults, and the
// validation whose every error names the offending field.
//
// It does not own what a loaded config turns into (the deployments and rings
// of package proxy and proxy/upstream), nor process knobs, which are flags of
// cmd/gateway. A Config is plain data: once validated, nothing changes it.
package config
