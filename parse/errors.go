package parse

import (
	"errors"
	"strconv"
)

// The messages of these errors are written for the client that sent the body: they name no
// internals. They carry no "parse:" prefix for that reason.
var (
	// ErrSyntax is the error that every *SyntaxError wraps.
	ErrSyntax = errors.New("request body is not valid JSON")

	// ErrNotObject is returned by Peek when the body is empty or is not a JSON object.
	ErrNotObject = errors.New("request body must be a JSON object")

	// ErrModelType is returned by Peek when the top-level "model" is not a string.
	ErrModelType error = &FieldTypeError{Field: "model"}

	// ErrSessionIDType is returned by Peek when the top-level "session_id" is neither a string
	// nor null.
	ErrSessionIDType error = &FieldTypeError{Field: "session_id"}

	// ErrPreviousResponseIDType is returned by Peek when the top-level "previous_response_id" is
	// neither a string nor null.
	ErrPreviousResponseIDType error = &FieldTypeError{Field: "previous_response_id"}
)

// SyntaxError reports where and why a body is not valid JSON. It wraps ErrSyntax.
type SyntaxError struct {
	Offset int    // byte offset in the body where the problem was found
	Reason string // what was wrong, e.g. "invalid escape in string"
}

func (e *SyntaxError) Error() string {
	return ErrSyntax.Error() + ": " + e.Reason + " at byte " + strconv.Itoa(e.Offset)
}

// Unwrap returns ErrSyntax, so errors.Is(err, ErrSyntax) holds.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// FieldTypeError reports a top-level field of the wrong JSON type. Peek returns one of the
// sentinels ErrModelType, ErrSessionIDType, ErrPreviousResponseIDType; errors.As gives the
// field name, e.g. for the "param" of an error body.
type FieldTypeError struct {
	Field string // the JSON key, e.g. "session_id"
}

func (e *FieldTypeError) Error() string { return e.Field + " must be a string" }

// syntaxError builds the error Peek returns; it allocates, but only on the error path.
func syntaxError(offset int, reason string) error {
	return &SyntaxError{Offset: offset, Reason: reason}
}

// errTooDeep is the reason given when nesting goes past maxDepth.
const errTooDeep = "objects and arrays nested deeper than 10000 levels"
