package operator

import (
	"fmt"
	"io"
	"strings"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogLevels are the --log-level values, as Karpenter's: debug adds the decisions'
// details (logr's V(1)), error keeps only errors.
var LogLevels = []string{"debug", "info", "error"}

// ParseLogLevel checks a --log-level value; empty means info, as in Karpenter.
func ParseLogLevel(s string) (string, error) {
	switch s {
	case "":
		return "info", nil
	case "debug", "info", "error":
		return s, nil
	}
	return "", fmt.Errorf("log level %q: want one of %s", s, strings.Join(LogLevels, ", "))
}

// NewLogger is the controller's logger: JSON lines on w at the given level.
func NewLogger(w io.Writer, level string) (logr.Logger, error) {
	level, err := ParseLogLevel(level)
	if err != nil {
		return logr.Logger{}, err
	}
	lvl := zapcore.InfoLevel
	switch level {
	case "debug":
		lvl = zapcore.DebugLevel // logr's V(1)
	case "error":
		lvl = zapcore.ErrorLevel
	}
	return zap.New(zap.WriteTo(w), zap.Level(lvl)), nil
}
