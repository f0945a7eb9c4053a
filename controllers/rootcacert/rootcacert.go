// Package rootcacert is the root CA certificate publisher, as
// kube-controller-manager runs it: the ConfigMap kube-root-ca.crt in every
// namespace holds the server's CA bundle (key ca.crt) and its description
// annotation, and is put back when deleted or changed.
package rootcacert

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// The published ConfigMap, as kube-controller-manager names and describes it.
const (
	ConfigMapName         = "kube-root-ca.crt"
	DescriptionAnnotation = "kubernetes.io/description"
	Description           = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
		"No other usage is guaranteed across distributions of Kubernetes clusters."
)

// Publisher is the root CA certificate publisher.
type Publisher struct {
	controller.Parts
	client     kubernetes.Interface
	configMaps corev1listers.ConfigMapLister
	rootCA     string
	queue      *controller.Queue
}

// New returns the publisher of cfg's server, publishing cfg.RootCA.
func New(cfg controllers.Config) (*Publisher, error) {
	p := &Publisher{client: cfg.Client, rootCA: string(cfg.RootCA),
		configMaps: cfg.Informers.Core().V1().ConfigMaps().Lister(),
		queue:      controller.NewQueue("root_ca_cert_publisher", cfg.QueueMetrics)}
	p.Name, p.Observer, p.Queues = string(controllers.RootCACertPublisher), controller.NewObserver(cfg.Revisions), []*controller.Queue{p.queue}
	configMap := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == ConfigMapName {
			p.queue.Add(cm.Namespace)
		}
	}
	err := p.Observer.Watch(corev1.Resource("configmaps"), cfg.Informers.Core().V1().ConfigMaps().Informer(),
		cache.ResourceEventHandlerFuncs{DeleteFunc: configMap, UpdateFunc: func(_, o any) { configMap(o) }})
	if err != nil {
		return nil, err
	}
	namespace := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok && ns.Status.Phase == corev1.NamespaceActive {
			p.queue.Add(ns.Name)
		}
	}
	err = p.Observer.Watch(corev1.Resource("namespaces"), cfg.Informers.Core().V1().Namespaces().Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: namespace, UpdateFunc: func(_, o any) { namespace(o) }})
	return p, err
}

// Run publishes the CA until ctx ends.
func (p *Publisher) Run(ctx context.Context) { p.queue.Run(ctx, 1, p.sync) }

func (p *Publisher) sync(ctx context.Context, ns string) error {
	data := map[string]string{"ca.crt": p.rootCA}
	cm, err := p.configMaps.ConfigMaps(ns).Get(ConfigMapName)
	switch {
	case apierrors.IsNotFound(err):
		_, err = p.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Annotations: map[string]string{DescriptionAnnotation: Description}},
			Data:       data,
		}, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // the namespace is gone or going
		}
		return err
	case err != nil:
		return err
	}
	if maps.Equal(cm.Data, data) && cm.Annotations[DescriptionAnnotation] != "" {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = data
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[DescriptionAnnotation] = Description
	_, err = p.client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	return err
}
