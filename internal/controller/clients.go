package controller

import (
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

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
