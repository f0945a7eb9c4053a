package controlplane

// The components componentstatuses reports (providers.Config.Components).
// kube-apiserver probes kube-scheduler's and kube-controller-manager's
// /healthz on 127.0.0.1 at their default ports, and its storage. Here the
// scheduler and kube-controller-manager's controllers are this server's own
// loops, so they are healthy when they run, and unhealthy with an error
// saying so when they do not; nothing is probed over the network, which
// would reach whatever else listens on this machine's ports.

import (
	"context"
	"errors"
	"slices"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/storage"
)

// components are the checks of the components of a server running enabled
// and storing in backend (whose health check is check): etcd-0 only when
// the backend is etcd, as kube-apiserver has one per storage backend and
// a memory backend is none.
func components(enabled []controllers.Name, backend storage.Backend, check func(context.Context) error) map[string]func(context.Context) error {
	runs := func(err error) func(context.Context) error {
		return func(context.Context) error { return err }
	}
	out := map[string]func(context.Context) error{
		"scheduler":          runs(errors.New("kube-scheduler does not run: kubeembed's scheduler (controller \"scheduler\") is not in this server's Controllers")),
		"controller-manager": runs(errors.New("kube-controller-manager does not run: none of its controllers is in this server's Controllers")),
	}
	if slices.Contains(enabled, controllers.Scheduler) {
		out["scheduler"] = runs(nil)
	}
	if slices.ContainsFunc(enabled, controllers.Name.ControllerManager) {
		out["controller-manager"] = runs(nil)
	}
	if _, ok := backend.(storage.Etcd); ok {
		out["etcd-0"] = check
	}
	return out
}
