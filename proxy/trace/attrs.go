package trace

import (
	"strconv"

	"go.opentelemetry.io/otel/attribute"
)

// Attribute keys: the OpenTelemetry GenAI and HTTP semantic conventions
// v1.37.0 (SchemaURL), and the gateway's own under "gateway.". None carries
// a prompt, a completion, a key or a secret: the caller is named by its key
// id, the session by a hash of its key.
const (
	KeyOperation     = "gen_ai.operation.name"
	KeyProvider      = "gen_ai.provider.name"
	KeyRequestModel  = "gen_ai.request.model"
	KeyResponseModel = "gen_ai.response.model"
	KeyResponseID    = "gen_ai.response.id"
	KeyInputTokens   = "gen_ai.usage.input_tokens"
	KeyOutputTokens  = "gen_ai.usage.output_tokens"
	KeyServerAddress = "server.address"
	KeyServerPort    = "server.port"
	KeyStatus        = "http.response.status_code"
	KeyErrorType     = "error.type"

	KeyKeyID       = "gateway.key_id"
	KeyDeployment  = "gateway.deployment"
	KeySession     = "gateway.session_hash"
	KeyAttempt     = "gateway.attempt"
	KeyAttempts    = "gateway.attempts"
	KeyRetryReason = "gateway.retry_reason"
	// KeyCost is the call's cost in USD at the configured prices, on calls
	// of a priced model (docs/budgets.md).
	KeyCost = "gateway.cost_usd"

	// EventFirstByte marks when the answer's first byte was ready for the
	// client.
	EventFirstByte = "gateway.first_byte"
)

// attemptAttrs are an attempt's attributes known when it is sent.
func attemptAttrs(a *Attempt) []attribute.KeyValue {
	host, port := portOf(a.Address)
	kv := make([]attribute.KeyValue, 0, 8)
	kv = appendString(kv, KeyOperation, a.Operation)
	kv = appendString(kv, KeyProvider, a.Provider)
	kv = appendString(kv, KeyRequestModel, a.Model)
	kv = appendString(kv, KeyServerAddress, host)
	if port > 0 {
		kv = append(kv, attribute.Int(KeyServerPort, port))
	}
	kv = appendString(kv, KeyDeployment, a.Deployment)
	return append(kv, attribute.Int(KeyAttempt, a.N))
}

// outcomeAttrs are what the answer tells, for the call and the attempt that
// answered.
func outcomeAttrs(o *Outcome) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 8)
	kv = appendString(kv, KeyResponseModel, o.ResponseModel)
	kv = appendString(kv, KeyResponseID, o.ResponseID)
	if o.Usage {
		kv = append(kv, attribute.Int64(KeyInputTokens, o.InputTokens), attribute.Int64(KeyOutputTokens, o.OutputTokens))
	}
	if o.Status > 0 {
		kv = append(kv, attribute.Int(KeyStatus, o.Status))
	}
	return appendString(kv, KeyErrorType, errorType(o))
}

// callAttrs are the server span's own.
func callAttrs(o *Outcome) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 8)
	kv = appendString(kv, KeyOperation, o.Operation)
	kv = appendString(kv, KeyProvider, o.Provider)
	kv = appendString(kv, KeyRequestModel, o.RequestModel)
	kv = appendString(kv, KeyKeyID, o.KeyID)
	kv = appendString(kv, KeyDeployment, o.Deployment)
	kv = appendString(kv, KeySession, o.Session)
	if o.Attempts > 0 {
		kv = append(kv, attribute.Int(KeyAttempts, o.Attempts))
	}
	if o.Priced {
		kv = append(kv, attribute.Float64(KeyCost, float64(o.CostPicoUSD)/1e12))
	}
	return kv
}

// errorType is the call's failure class: the gateway's reason, else the
// answer's status code for a 4xx or 5xx, else "" (no failure).
func errorType(o *Outcome) string {
	switch {
	case o.ErrorType != "":
		return o.ErrorType
	case o.Status >= 400:
		return strconv.Itoa(o.Status)
	case o.Status == 0:
		return "_OTHER"
	}
	return ""
}

func appendString(kv []attribute.KeyValue, key, v string) []attribute.KeyValue {
	if v == "" {
		return kv
	}
	return append(kv, attribute.String(key, v))
}
