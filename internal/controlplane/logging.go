package controlplane

import (
	"context"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"k8s.io/klog/v2"
)

// WithLogger makes log the contextual logger of ctx, which the Kubernetes
// libraries use in preference to klog's global logger.
func WithLogger(ctx context.Context, log *zap.Logger) context.Context {
	return klog.NewContext(ctx, zapr.NewLogger(log))
}
