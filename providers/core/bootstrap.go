package core

// The core group's post-start hooks, under kube-apiserver's names: the
// objects every cluster has, created at start and kept (recreated or put
// back when someone deletes or changes them).

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/retry"
	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// systemNamespaces exist on every cluster; kube-apiserver's system namespaces
// controller creates them at start-up and again if they are deleted.
var systemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// kubernetesService is default/kubernetes: the server's own Service, its
// Endpoints and EndpointSlice.
const kubernetesService = "kubernetes"

// hooks are the core group's post-start hooks. /readyz is not ok until each
// has done its first pass, so the objects exist when Start returns. The
// informers they watch are requested now, so that they are synced by then.
var hooks = map[string]registry.Hook{
	"start-system-namespaces-controller": registry.ConfigHook(func(cfg providers.Config) genericapiserver.PostStartHookFunc {
		return keep(isSystemNamespace, ensureSystemNamespaces, cfg.Informers.Core().V1().Namespaces().Informer())
	}),
	"start-kubernetes-service-cidr-controller": registry.ConfigHook(func(cfg providers.Config) genericapiserver.PostStartHookFunc {
		return keep(named(kubernetesService), ensureServiceCIDR(serviceCIDR(cfg)), cfg.Informers.Networking().V1().ServiceCIDRs().Informer())
	}),
	"bootstrap-controller": registry.ConfigHook(func(cfg providers.Config) genericapiserver.PostStartHookFunc {
		endpoints := cfg.Informers.Core().V1().Endpoints().Informer()
		slices := cfg.Informers.Discovery().V1().EndpointSlices().Informer()
		services := cfg.Informers.Core().V1().Services().Informer()
		namespaces, ensureService := cfg.Informers.Core().V1().Namespaces().Lister(), ensureKubernetesService(cfg.ServingAddress, serviceCIDR(cfg))
		ensure := func(ctx context.Context, client kubernetes.Interface) error {
			if err := retry.NamespaceSeen(namespaces, metav1.NamespaceDefault); err != nil {
				return err
			}
			return ensureService(ctx, client)
		}
		return keep(named(kubernetesService), ensure, endpoints, slices, services)
	}),
}

// keep returns a hook that calls ensure once (the hook returns when it has
// succeeded), then again whenever one of the informers reports a change or
// deletion of an object that match selects, until the server stops.
func keep(match func(any) bool, ensure func(context.Context, kubernetes.Interface) error,
	informers ...cache.SharedIndexInformer) genericapiserver.PostStartHookFunc {
	kick := make(chan struct{}, 1)
	for _, inf := range informers {
		onChange := func(obj any) {
			if match(obj) {
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) { onChange(obj) },
			DeleteFunc: onChange,
		})
	}
	return func(ctx genericapiserver.PostStartHookContext) error {
		client, err := kubernetes.NewForConfig(ctx.LoopbackClientConfig)
		if err != nil {
			return err
		}
		ensureUntil := func() error { return retry.Until(ctx, func(c context.Context) error { return ensure(c, client) }) }
		if err := ensureUntil(); err != nil {
			return err
		}
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-kick:
					_ = ensureUntil() // fails only when the server stops
				}
			}
		}()
		return nil
	}
}

// objectName is the name of a cluster-scoped object or of one in the default
// namespace (where default/kubernetes lives); "" for others.
func objectName(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok || (m.GetNamespace() != "" && m.GetNamespace() != metav1.NamespaceDefault) {
		return ""
	}
	return m.GetName()
}

func named(name string) func(any) bool {
	return func(obj any) bool { return objectName(obj) == name }
}

func isSystemNamespace(obj any) bool {
	for _, ns := range systemNamespaces {
		if objectName(obj) == ns {
			return true
		}
	}
	return false
}

func ensureSystemNamespaces(ctx context.Context, client kubernetes.Interface) error {
	for _, name := range systemNamespaces {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}

// ensureServiceCIDR keeps the "kubernetes" ServiceCIDR, the service range's,
// Ready.
func ensureServiceCIDR(serviceRange netip.Prefix) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, client kubernetes.Interface) error {
		cidrs := client.NetworkingV1().ServiceCIDRs()
		cidr, err := cidrs.Get(ctx, kubernetesService, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cidr, err = cidrs.Create(ctx, &networkingv1.ServiceCIDR{
				ObjectMeta: metav1.ObjectMeta{Name: kubernetesService},
				Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{serviceRange.String()}},
			}, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("the kubernetes service CIDR: %w", err)
		}
		for _, c := range cidr.Status.Conditions {
			if c.Type == networkingv1.ServiceCIDRConditionReady && c.Status == metav1.ConditionTrue {
				return nil
			}
		}
		cidr.Status.Conditions = []metav1.Condition{{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
			Message: "Kubernetes default Service CIDR is ready", LastTransitionTime: metav1.Now()}}
		_, err = cidrs.UpdateStatus(ctx, cidr, metav1.UpdateOptions{})
		return err
	}
}

// ensureKubernetesService keeps default/kubernetes: the Service on the first
// IP of the range, and its Endpoints and EndpointSlice at the server's
// address, as kube-apiserver's endpoint reconciler publishes its own.
func ensureKubernetesService(addr netip.AddrPort, serviceRange netip.Prefix) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, client kubernetes.Interface) error {
		// Read first: on storage that holds the Service (a restart), a
		// create would fail on its cluster IP, allocated by the repair.
		services := client.CoreV1().Services(metav1.NamespaceDefault)
		ports := []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(int32(addr.Port()))}}
		svc, err := services.Get(ctx, kubernetesService, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			ip := serviceRange.Addr().Next().String()
			_, err = services.Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: kubernetesService, Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
				Spec:       corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, SessionAffinity: corev1.ServiceAffinityNone, Ports: ports},
			}, metav1.CreateOptions{})
		case err == nil && !reflect.DeepEqual(svc.Spec.Ports, ports):
			svc.Spec.Ports = ports // another server's, or changed
			_, err = services.Update(ctx, svc, metav1.UpdateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("the kubernetes service: %w", err)
		}
		if err := ensureEndpoints(ctx, client, addr); err != nil {
			return err
		}
		return ensureEndpointSlice(ctx, client, addr)
	}
}

func ensureEndpoints(ctx context.Context, client kubernetes.Interface, addr netip.AddrPort) error {
	want := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: kubernetesService, Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: addr.Addr().String()}},
			Ports: []corev1.EndpointPort{{Name: "https", Port: int32(addr.Port()), Protocol: corev1.ProtocolTCP}}}},
	}
	endpoints := client.CoreV1().Endpoints(metav1.NamespaceDefault)
	cur, err := endpoints.Get(ctx, kubernetesService, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = endpoints.Create(ctx, want, metav1.CreateOptions{})
	case err == nil && !reflect.DeepEqual(cur.Subsets, want.Subsets):
		cur.Subsets = want.Subsets
		_, err = endpoints.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("the kubernetes endpoints: %w", err)
	}
	return nil
}

func ensureEndpointSlice(ctx context.Context, client kubernetes.Interface, addr netip.AddrPort) error {
	family := discoveryv1.AddressTypeIPv4
	if addr.Addr().Is6() {
		family = discoveryv1.AddressTypeIPv6
	}
	want := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: kubernetesService, Labels: map[string]string{discoveryv1.LabelServiceName: kubernetesService}},
		AddressType: family,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr.Addr().String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(addr.Port())), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	slices := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	cur, err := slices.Get(ctx, kubernetesService, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
	case err == nil && (!reflect.DeepEqual(cur.Endpoints, want.Endpoints) || !reflect.DeepEqual(cur.Ports, want.Ports)):
		cur.Endpoints, cur.Ports = want.Endpoints, want.Ports
		_, err = slices.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("the kubernetes endpoint slice: %w", err)
	}
	return nil
}
