package etcd

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
)

// withTimeout bounds the calls of a store that end (not watches) by
// Options.RequestTimeout when the caller set no earlier deadline.
type withTimeout struct {
	storage.Interface
	timeout time.Duration
}

func (w withTimeout) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= w.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, w.timeout)
}

func (w withTimeout) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	ctx, cancel := w.bound(ctx)
	defer cancel()
	return w.Interface.Create(ctx, key, obj, out, ttl)
}

func (w withTimeout) Delete(ctx context.Context, key string, out runtime.Object, pre *storage.Preconditions,
	validate storage.ValidateObjectFunc, cached runtime.Object, opts storage.DeleteOptions) error {
	ctx, cancel := w.bound(ctx)
	defer cancel()
	return w.Interface.Delete(ctx, key, out, pre, validate, cached, opts)
}

func (w withTimeout) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	ctx, cancel := w.bound(ctx)
	defer cancel()
	return w.Interface.Get(ctx, key, opts, out)
}

func (w withTimeout) GetList(ctx context.Context, key string, opts storage.ListOptions, out runtime.Object) error {
	ctx, cancel := w.bound(ctx)
	defer cancel()
	return w.Interface.GetList(ctx, key, opts, out)
}

func (w withTimeout) GuaranteedUpdate(ctx context.Context, key string, out runtime.Object, ignoreNotFound bool,
	pre *storage.Preconditions, tryUpdate storage.UpdateFunc, cached runtime.Object) error {
	ctx, cancel := w.bound(ctx)
	defer cancel()
	return w.Interface.GuaranteedUpdate(ctx, key, out, ignoreNotFound, pre, tryUpdate, cached)
}
