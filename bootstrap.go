package apiserver

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver/providers/core"
	"github.com/kubeembed/apiserver/providers/scheduling"
)

// systemNamespaces exist on every cluster; kube-apiserver's system namespaces
// controller creates them at start-up.
var systemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// bootstrapSystemObjects creates the system namespaces and priority classes,
// the "kubernetes" ServiceCIDR and the default/kubernetes Service (the
// server's own, on the first IP of the range and its secure port). The hook
// runs once the server listens; /readyz is not ok until it returns, so they
// exist when Start returns.
func bootstrapSystemObjects(ctx genericapiserver.PostStartHookContext, port int32) error {
	client, err := kubernetes.NewForConfig(ctx.LoopbackClientConfig)
	if err != nil {
		return err
	}
	for _, pc := range scheduling.SystemPriorityClasses() {
		if err := retry(ctx, func(c context.Context) error {
			_, err := client.SchedulingV1().PriorityClasses().Create(c, pc, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}); err != nil {
			return fmt.Errorf("create priority class %s: %w", pc.Name, err)
		}
	}
	if err := retry(ctx, func(c context.Context) error {
		cidr, err := client.NetworkingV1().ServiceCIDRs().Create(c, &networkingv1.ServiceCIDR{
			ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
			Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{core.ServiceCIDR.String()}},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
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
		if err := retry(ctx, func(c context.Context) error {
			_, err := client.CoreV1().Namespaces().Create(c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}); err != nil {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	kubernetesIP := core.ServiceCIDR.Addr().Next().String()
	if err := retry(ctx, func(c context.Context) error {
		_, err := client.CoreV1().Services(metav1.NamespaceDefault).Create(c, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
			Spec: corev1.ServiceSpec{ClusterIP: kubernetesIP, ClusterIPs: []string{kubernetesIP}, SessionAffinity: corev1.ServiceAffinityNone,
				Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(port)}}},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("create the kubernetes service: %w", err)
	}
	return nil
}

// retry calls f until it succeeds or ctx ends; the first calls may race the
// server's own start-up (handlers not yet installed, informers not synced).
func retry(ctx context.Context, f func(context.Context) error) error {
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
