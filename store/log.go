package store

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// SlogLogger adapts l to Pebble's logger: Pebble's routine lines (WAL replay,
// compactions) at debug level, its errors at error level. Fatalf logs and
// exits, as Pebble expects it not to return.
func SlogLogger(l *slog.Logger) pebble.Logger { return slogLogger{l} }

type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Infof(format string, args ...any) {
	s.l.Debug("store", "detail", fmt.Sprintf(format, args...))
}

func (s slogLogger) Errorf(format string, args ...any) {
	s.l.Error("store", "detail", fmt.Sprintf(format, args...))
}

func (s slogLogger) Fatalf(format string, args ...any) {
	s.l.Error("store: fatal", "detail", fmt.Sprintf(format, args...))
	os.Exit(1)
}
