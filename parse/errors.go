package parse

import (
	"errors"
	"strconv"
	"strings"
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

	// ErrDuplicateField is the error that every *DuplicateFieldError wraps.
	ErrDuplicateField = errors.New("a field appears more than once")
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

// DuplicateFieldError reports a top-level field that Peek reads and that appears more than
// once, counting escaped and case-folded spellings, or that appears once but spelled as a
// case variant of its name. Decoders differ on which member of a repeated key counts and on
// whether case matters, so such a body is refused rather than read one way and forwarded to be
// read another. It wraps ErrDuplicateField.
type DuplicateFieldError struct {
	Field   string // the exact JSON key, e.g. "previous_response_id", or its path in the body
	Variant bool   // a single member spelled as a case variant, e.g. "MODEL"
}

func (e *DuplicateFieldError) Error() string {
	if e.Variant {
		name := e.Field[strings.LastIndexByte(e.Field, '.')+1:] // "stream_options.include_usage"
		return e.Field + " must be spelled exactly \"" + name + "\": a case variant of it is ambiguous"
	}
	return e.Field + " appears more than once (counting escaped and case variants of it)"
}

// Unwrap returns ErrDuplicateField, so errors.Is(err, ErrDuplicateField) holds.
func (e *DuplicateFieldError) Unwrap() error { return ErrDuplicateField }
