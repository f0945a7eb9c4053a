// Package globals contains the process-wide state that the Kubernetes
// libraries force on every server of a process, set up once:
//
//   - klog: the libraries log through klog's global logger when they have no
//     contextual logger. The first New (or storage/etcd.New, whose etcd
//     client logs through klog before any server exists) points it, once,
//     at a zap logger that prints errors to stderr and drops the rest, unless
//     Options.KeepKlogLogger; servers pass their own logger through
//     contexts, which the libraries prefer where they support it.
//   - feature gates (k8s.io/apiserver/pkg/util/feature.DefaultFeatureGate):
//     read, never written, so every server sees kube-apiserver's defaults.
//     kubeembed's own code reads them through Features, the one place that
//     names the process-wide gate.
//   - the legacy metrics registry: every server would report into the same
//     counters, so servers do not use it; each serves /metrics from a
//     registry of its own (internal/controlplane/metrics.go).
//   - the effective version: one immutable value shared by every server.
//   - the schemes of apiextensions-apiserver and kube-aggregator: package
//     variables filled in at init and only read afterwards.
//
// Process-wide caches of our own live next to what they cache, each entry
// written once and then only read: the OpenAPI documents of the servers
// that serve the same providers (internal/openapi.V3Services and V2Routes).
// (Certificate authorities are per server: a client certificate of one
// server is no credential for another.)
package globals

import (
	"errors"
	"os"
	"strings"
	"sync"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	"github.com/kubeembed/apiserver/internal/inproc"
)

var initOnce sync.Once

// InitKlog points klog's global logger, once per process, at a logger that
// prints errors to stderr and drops the rest: the libraries' info logs
// would otherwise flood a test's output. Errors of a request a closing
// server cut off (internal/inproc's ErrClosed: the API Priority and
// Fairness controller writes its status from goroutines no Close can wait
// for) are dropped too: they are the server's Close, not a failure.
// apiserver.Options.KeepKlogLogger skips it.
func InitKlog() {
	initOnce.Do(func() {
		core := zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
			zapcore.Lock(os.Stderr), zapcore.ErrorLevel)
		klog.SetLoggerWithOptions(zapr.NewLogger(zap.New(withoutClosing{core})), klog.ContextualLogger(true))
	})
}

// withoutClosing drops the entries that report inproc.ErrClosed (klog's
// printf-style errors carry it in their message only; some libraries wrap
// the error in one that does not unwrap: client-go's discovery logged
// "Couldn't get current server API group list" so, its text only naming
// it).
type withoutClosing struct{ zapcore.Core }

func (c withoutClosing) With(fields []zapcore.Field) zapcore.Core {
	return withoutClosing{c.Core.With(fields)}
}

func (c withoutClosing) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c withoutClosing) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if strings.Contains(e.Message, inproc.ErrClosed.Error()) {
		return nil
	}
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && (errors.Is(err, inproc.ErrClosed) || strings.Contains(err.Error(), inproc.ErrClosed.Error())) {
			return nil
		}
	}
	return c.Core.Write(e, fields)
}

var (
	versionOnce sync.Once
	version     basecompatibility.EffectiveVersion
)

// EffectiveVersion returns the effective version for binary version v; the
// first call fixes v for the process.
func EffectiveVersion(v string) basecompatibility.EffectiveVersion {
	versionOnce.Do(func() {
		version = basecompatibility.NewEffectiveVersionFromString(v, "", "")
	})
	return version
}

// Features is the process-wide feature gate every server reads
// (kube-apiserver's defaults; nothing in kubeembed writes it).
func Features() featuregate.FeatureGate { return utilfeature.DefaultFeatureGate }
