package controller

import (
	"context"

	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/kubeembed/apiserver/controllers"
)

// NamedClient is a client of cfg named as kube-controller-manager names a
// controller's: its user agent ends in "/"+name, so its writes' field
// manager (the user agent up to the first "/") stays
// kube-controller-manager. API warnings are not logged, as
// kube-controller-manager silences them (some read deprecated APIs, such
// as v1 Endpoints). Without cfg.RESTConfig it is cfg.Client.
func NamedClient(cfg controllers.Config, name string) (kubernetes.Interface, error) {
	if cfg.RESTConfig == nil {
		return cfg.Client, nil
	}
	rc := rest.CopyConfig(cfg.RESTConfig)
	rc.UserAgent += "/" + name
	rc.WarningHandler = rest.NoWarnings{}
	return kubernetes.NewForConfig(rc)
}

// StartEvents starts a core/v1 event broadcaster writing through client,
// as kube-controller-manager's controllers and the kubelet record, and
// returns it with what stops it (call it when Run ends). The broadcaster
// outlives ctx's cancellation on purpose: events recorded as Run ends are
// still written (the server drains its own requests at Close) instead of
// failing and being logged as errors.
func StartEvents(ctx context.Context, client kubernetes.Interface) (record.EventBroadcaster, func()) {
	b := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b, b.Shutdown
}
