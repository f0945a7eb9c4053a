package core

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver/internal/retry"
	"github.com/kubeembed/apiserver/providers"
)

// systemNamespaces exist on every cluster; kube-apiserver's system namespaces
// controller creates them at start-up.
var systemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// bootstrapController creates, as kube-apiserver's hook of that name does,
// the "kubernetes" ServiceCIDR, the system namespaces and the
// default/kubernetes Service: the server's own, on the first IP of the range
// and the server's port. /readyz is not ok until it returns, so they exist
// when Start returns.
func bootstrapController(port int32) genericapiserver.PostStartHookFunc {
	return func(ctx genericapiserver.PostStartHookContext) error {
		client, err := kubernetes.NewForConfig(ctx.LoopbackClientConfig)
		if err != nil {
			return err
		}
		if err := retry.Ensure(ctx, func(c context.Context) error {
			cidr, err := client.NetworkingV1().ServiceCIDRs().Create(c, &networkingv1.ServiceCIDR{
				ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
				Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{serviceCIDR.String()}},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			cidr.Status.Conditions = []metav1.Condition{{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
				Message: "Kubernetes default Service CIDR is ready", LastTransitionTime: metav1.Now()}}
			_, err = client.NetworkingV1().ServiceCIDRs().UpdateStatus(c, cidr, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("create the kubernetes service CIDR: %w", err)
		}
		for _, name := range systemNamespaces {
			if err := retry.Ensure(ctx, func(c context.Context) error {
				_, err := client.CoreV1().Namespaces().Create(c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				return err
			}); err != nil {
				return fmt.Errorf("create namespace %s: %w", name, err)
			}
		}
		ip := serviceCIDR.Addr().Next().String()
		if err := retry.Ensure(ctx, func(c context.Context) error {
			_, err := client.CoreV1().Services(metav1.NamespaceDefault).Create(c, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
				Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, SessionAffinity: corev1.ServiceAffinityNone,
					Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(port)}}},
			}, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("create the kubernetes service: %w", err)
		}
		return nil
	}
}

// bootstrapHook is the core group's post-start hook.
func bootstrapHook(cfg providers.Config) (string, genericapiserver.PostStartHookFunc, error) {
	return "bootstrap-controller", bootstrapController(cfg.ServingPort), nil
}
