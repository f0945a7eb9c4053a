// Package retry retries the server's calls to itself: the first calls of
// post-start hooks and of Start may race the server's own start-up (handlers
// not installed yet, informers not synced), and controllers redo their work
// periodically.
package retry

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// Until calls f until it succeeds or ctx ends, backing off from 1 ms to
// 50 ms; the error then names ctx's error and f's last.
func Until(ctx context.Context, f func(context.Context) error) error {
	delay := time.Millisecond
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// Ensure is Until for a create that may find its object already there,
// which counts as success.
func Ensure(ctx context.Context, create func(context.Context) error) error {
	return Until(ctx, func(ctx context.Context) error {
		if err := create(ctx); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
}

// NamespaceSeen fails until namespaces (a synced informer's lister) has seen
// namespace ns. Called first in a create retried by Until, it skips
// NamespaceLifecycle admission's 50 ms missingNamespaceWait, which a create
// in a namespace its informer has not seen yet waits out: three post-start
// hooks paid it at every start, racing the hook that creates the system
// namespaces.
func NamespaceSeen(namespaces corev1listers.NamespaceLister, ns string) error {
	_, err := namespaces.Get(ns)
	return err
}

// Every calls f every interval (the first call after one interval) until
// ctx ends; a failed call waits for the next, as kube-apiserver's periodic
// controllers do.
func Every(ctx context.Context, interval time.Duration, f func(context.Context) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = f(ctx)
		}
	}
}
