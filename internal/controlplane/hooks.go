package controlplane

// The server's own post-start hooks and health checks, under
// kube-apiserver's names (the providers add theirs: core's
// bootstrap-controller, start-system-namespaces-controller,
// start-kubernetes-service-cidr-controller; scheduling's
// bootstrap-system-priority-classes). docs/architecture.md lists the hooks of
// kube-apiserver left out and why.

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/google/uuid"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/features"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/globals"
	"github.com/kubeembed/apiserver/internal/retry"
	"github.com/kubeembed/apiserver/storage"
)

// Identity leases, as kube-apiserver's: one per server in kube-system,
// renewed every 10 s, collected an hour after their last renewal.
const (
	identityLabel         = "apiserver.kubernetes.io/identity"
	identityLeaseDuration = time.Hour
	identityRenewInterval = 10 * time.Second
	legacyTokenTracking   = "kube-apiserver-legacy-service-account-token-tracking"
)

// serverHooks are the server's own post-start hooks and health checks,
// registered on the core tier (the aggregator takes them over from its
// delegate).
type serverHooks struct {
	informers *informerSet
	storage   storage.Backend
	// address is the server's in the cluster; keys publish its client
	// authentication.
	address netip.AddrPort
	keys    Keys
}

func (h serverHooks) register(tier *genericapiserver.GenericAPIServer) error {
	hooks := []struct {
		name string
		hook genericapiserver.PostStartHookFunc
	}{
		// The admission plugins' informers are the set's; starting it
		// again starts those the plugins asked for since.
		{"start-apiserver-admission-initializer", func(genericapiserver.PostStartHookContext) error { h.informers.start(); return nil }},
		{"storage-readiness", func(ctx genericapiserver.PostStartHookContext) error {
			return retry.Until(ctx, h.storage.Check)
		}},
		{"start-kube-apiserver-identity-lease-controller", h.identityLease(tier.APIServerID)},
		{"start-kube-apiserver-identity-lease-garbage-collector", collectIdentityLeases},
		{"start-legacy-token-tracking-controller", h.trackLegacyTokens},
		{"start-cluster-authentication-info-controller", h.publishAuthenticationInfo},
		// By name only, as kube-apiserver v1.37 lists it (its
		// UnknownVersionInteroperabilityProxy gate is on by default): it
		// publishes the server's address to peer API servers of other
		// versions, outside the API. A kubeembed server has no peers.
		{"peer-endpoint-reconciler-controller", func(genericapiserver.PostStartHookContext) error { return nil }},
	}
	for _, hk := range hooks {
		if err := addPostStartHook(tier, hk.name, hk.hook); err != nil {
			return err
		}
	}
	return tier.AddHealthChecks(healthz.NamedCheck("etcd", func(r *http.Request) error { return h.storage.Check(r.Context()) }))
}

// addPostStartHook registers a hook of the server's own (its hooks, the
// providers', the controllers' start hooks) on tier. genericapiserver ends
// the process (klog.Fatalf) when a post-start hook returns an error: right
// for kube-apiserver, a process of its own whose bootstrap failed, but a
// server closed while its hooks still run (Close after a Start whose
// context ended first) ended the test process that held it, silently, with
// exit status 255. An error a hook returns once the server is stopping
// (its context is done) is the stop's doing: it is logged, not returned.
func addPostStartHook(tier *genericapiserver.GenericAPIServer, name string, hook genericapiserver.PostStartHookFunc) error {
	return tier.AddPostStartHook(name, func(ctx genericapiserver.PostStartHookContext) error {
		err := hook(ctx)
		if err != nil && ctx.Err() != nil {
			klog.FromContext(ctx).V(2).Info("Post-start hook ended as the server stopped", "hook", name, "err", err)
			return nil
		}
		return err
	})
}

// servingCertificateCheck fails once the serving certificate has expired:
// loopback-serving-certificate, of /healthz and /livez (not /readyz), as on
// kube-apiserver.
func servingCertificateCheck(notAfter time.Time) healthz.HealthChecker {
	return healthz.NamedCheck("loopback-serving-certificate", func(*http.Request) error {
		if time.Now().After(notAfter) {
			return fmt.Errorf("the serving certificate expired at %s", notAfter.Format(time.RFC3339))
		}
		return nil
	})
}

// identityLease keeps the server's identity Lease in kube-system, named by
// the server's ID (as kube-apiserver: a hash of the host name), renewed every
// 10 s until the server stops.
func (h serverHooks) identityLease(name string) genericapiserver.PostStartHookFunc {
	return func(ctx genericapiserver.PostStartHookContext) error {
		client, err := kubernetes.NewForConfig(ctx.LoopbackClientConfig)
		if err != nil {
			return err
		}
		namespaces, renewal := h.informers.kube.Core().V1().Namespaces().Lister(), renewLease(client, h.identityLeaseObject(name))
		renew := func(ctx context.Context) error {
			if err := retry.NamespaceSeen(namespaces, metav1.NamespaceSystem); err != nil {
				return err
			}
			return renewal(ctx)
		}
		if err := retry.Until(ctx, renew); err != nil {
			return err
		}
		go retry.Every(ctx, identityRenewInterval, renew)
		return nil
	}
}

func (h serverHooks) identityLeaseObject(name string) *coordinationv1.Lease {
	hostname, _ := os.Hostname()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{identityLabel: "kube-apiserver", corev1.LabelHostname: hostname}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name + "_" + uuid.NewString()),
			LeaseDurationSeconds: ptr.To(int32(identityLeaseDuration.Seconds()))},
	}
	if globals.Features().Enabled(features.UnknownVersionInteroperabilityProxy) {
		lease.Annotations = map[string]string{corev1.AnnotationPeerAdvertiseAddress: h.address.String()}
	}
	return lease
}

// renewLease creates lease, or renews it.
func renewLease(client kubernetes.Interface, lease *coordinationv1.Lease) func(context.Context) error {
	name := lease.Name
	return func(ctx context.Context) error {
		leases := client.CoordinationV1().Leases(metav1.NamespaceSystem)
		cur, err := leases.Get(ctx, name, metav1.GetOptions{})
		now := metav1.NowMicro()
		if apierrors.IsNotFound(err) {
			l := lease.DeepCopy()
			l.Spec.RenewTime = &now
			_, err = leases.Create(ctx, l, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		cur.Spec = lease.Spec
		cur.Spec.RenewTime = &now
		_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}
}

// collectIdentityLeases deletes the identity leases of servers that stopped
// renewing them, once at start and then every hour.
func collectIdentityLeases(ctx genericapiserver.PostStartHookContext) error {
	client, err := kubernetes.NewForConfig(ctx.LoopbackClientConfig)
	if err != nil {
		return err
	}
	collect := func(ctx context.Context) error {
		leases := client.CoordinationV1().Leases(metav1.NamespaceSystem)
		list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: labels.Set{identityLabel: "kube-apiserver"}.String()})
		if err != nil {
			return err
		}
		for _, l := range list.Items {
			if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
				continue
			}
			if time.Since(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
				_ = leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
			}
		}
		return nil
	}
	_ = collect(ctx) // what a stopped server left; retried every hour
	go retry.Every(ctx, identityLeaseDuration, collect)
	return nil
}

// trackLegacyTokens records since when legacy service account tokens are
// tracked, as kube-apiserver does in a kube-system ConfigMap.
func (h serverHooks) trackLegacyTokens(ctx genericapiserver.PostStartHookContext) error {
	client, err := kubernetes.NewForConfig(ctx.LoopbackClientConfig)
	if err != nil {
		return err
	}
	namespaces := h.informers.kube.Core().V1().Namespaces().Lister()
	return retry.Ensure(ctx, func(c context.Context) error {
		if err := retry.NamespaceSeen(namespaces, metav1.NamespaceSystem); err != nil {
			return err
		}
		_, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(c, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: legacyTokenTracking},
			Data:       map[string]string{"since": time.Now().UTC().Format(time.DateOnly)},
		}, metav1.CreateOptions{})
		return err
	})
}

// publishAuthenticationInfo is kube-apiserver's cluster authentication info
// controller: it publishes the client CA (the server's own: it signs
// RESTConfigFor's certificates) in kube-system/extension-apiserver-authentication,
// for aggregated API servers and webhooks to read, as kube-apiserver does
// with --client-ca-file, and the front proxy's request-header
// authentication (--requestheader-*; compared by parity/).
func (h serverHooks) publishAuthenticationInfo(ctx genericapiserver.PostStartHookContext) error {
	client, err := kubernetes.NewForConfig(ctx.LoopbackClientConfig)
	if err != nil {
		return err
	}
	data := h.keys.FrontProxy.publishedInfo()
	data["client-ca-file"] = string(h.keys.CA.CertPEM)
	namespaces := h.informers.kube.Core().V1().Namespaces().Lister()
	return retry.Until(ctx, func(ctx context.Context) error {
		if err := retry.NamespaceSeen(namespaces, metav1.NamespaceSystem); err != nil {
			return err
		}
		cms := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
		cm, err := cms.Get(ctx, authenticationInfo, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: authenticationInfo, Namespace: metav1.NamespaceSystem}, Data: data}, metav1.CreateOptions{})
		case err == nil && !maps.Equal(cm.Data, data):
			cm.Data = data
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		return err
	})
}

// authenticationInfo is the ConfigMap kube-apiserver publishes its client
// authentication in.
const authenticationInfo = "extension-apiserver-authentication"
