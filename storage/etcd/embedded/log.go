package embedded

import (
	"strings"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcd logs, at warn and error, what is no one's problem in a member
// embedded on loopback: the configuration kubeembed chose (one port for
// HTTP and gRPC, the default name, simple tokens), a fresh data directory
// having no schema version yet, and, as it stops, its listeners being
// closed. These are logged at debug instead; anything else keeps its
// level.
var (
	chosen = []string{
		"Running http and grpc server on single port",
		"it isn't recommended to use default name",
		"simple token is not cryptographically signed",
		"Failed to detect schema version",
		"failed to update storage version",
	}
	stopping = []string{
		"setting up serving from embedded etcd failed",
		"stopping insecure grpc server due to error",
		"stopped insecure grpc server due to error",
		"stopping grpc server due to error",
		"stopped grpc server due to error",
	}
)

// quietLogger wraps logger so that etcd's expected warnings and errors
// (chosen; stopping, once closing is set) are debug entries.
func quietLogger(logger *zap.Logger, closing *atomic.Bool) *zap.Logger {
	return logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return quietCore{Core: c, closing: closing}
	}))
}

type quietCore struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c quietCore) With(fields []zapcore.Field) zapcore.Core {
	return quietCore{Core: c.Core.With(fields), closing: c.closing}
}

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level > zapcore.DebugLevel && c.expected(e.Message) {
		e.Level = zapcore.DebugLevel
	}
	return c.Core.Check(e, ce)
}

func (c quietCore) expected(msg string) bool {
	has := func(list []string) bool {
		for _, s := range list {
			if strings.HasPrefix(msg, s) {
				return true
			}
		}
		return false
	}
	return has(chosen) || c.closing.Load() && has(stopping)
}
