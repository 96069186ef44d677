package changelog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// slogLogger turns Badger's printf logger into slog. Badger's info output
// (compactions, table flushes) is debug here: it is noise at the volume a
// stream processor writes.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) log(level slog.Level, format string, args ...any) {
	if !s.l.Enabled(context.Background(), level) {
		return
	}
	s.l.Log(context.Background(), level, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (s slogLogger) Errorf(f string, a ...any)   { s.log(slog.LevelError, f, a...) }
func (s slogLogger) Warningf(f string, a ...any) { s.log(slog.LevelWarn, f, a...) }
func (s slogLogger) Infof(f string, a ...any)    { s.log(slog.LevelDebug, f, a...) }
func (s slogLogger) Debugf(f string, a ...any)   { s.log(slog.LevelDebug-4, f, a...) }
