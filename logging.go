package apiserver

import (
	"context"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"k8s.io/klog/v2"
)

// withLogger makes log the contextual logger of ctx, which the Kubernetes
// libraries use in preference to klog's global logger.
func withLogger(ctx context.Context, log *zap.Logger) context.Context {
	return klog.NewContext(ctx, zapr.NewLogger(log))
}
