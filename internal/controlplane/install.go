package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsclientv1 "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientretry "k8s.io/client-go/util/retry"

	"github.com/kubeembed/apiserver/internal/manifests"
	"github.com/kubeembed/apiserver/internal/retry"
)

// Install creates, as the client of admin, the CRDs of the server's
// options and waits until each is Established and served, then the RBAC
// objects of its options: what Start does once the server is ready.
func (cp *ControlPlane) Install(ctx context.Context, admin *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition,
	rbac []*unstructured.Unstructured) error {
	if len(crds) > 0 {
		client, err := apiextensionsclient.NewForConfig(admin)
		if err != nil {
			return err
		}
		disco, err := discovery.NewDiscoveryClientForConfig(admin)
		if err != nil {
			return err
		}
		in := crdInstaller{crds: client.ApiextensionsV1().CustomResourceDefinitions(), discovery: disco, lister: cp.crds}
		if err := in.install(ctx, crds); err != nil {
			return err
		}
	}
	return installRBAC(ctx, admin, rbac)
}

// crdInstaller installs CRDs through the server's API; lister is the
// custom resource handler's view of CRDs.
type crdInstaller struct {
	crds      apiextensionsclientv1.CustomResourceDefinitionInterface
	discovery discovery.DiscoveryInterface
	lister    apiextensionslisters.CustomResourceDefinitionLister
}

// install creates crds and waits until each is Established and its
// resources are served.
func (in crdInstaller) install(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition) error {
	var errs []error
	for _, crd := range crds {
		if err := applyCRD(ctx, in.crds, crd); err != nil {
			errs = append(errs, fmt.Errorf("install CRD %s: %w", crd.Name, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, crd := range crds {
		if err := in.waitEstablished(ctx, crd.Name); err != nil {
			return err
		}
	}
	for _, crd := range crds {
		if err := in.waitServed(ctx, crd); err != nil {
			return err
		}
	}
	return nil
}

// waitServed waits until discovery lists the resource of crd in each
// version it serves.
func (in crdInstaller) waitServed(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
		if err := retry.Until(ctx, func(ctx context.Context) error {
			list, err := discovery.ToDiscoveryInterfaceWithContext(in.discovery).ServerResourcesForGroupVersionWithContext(ctx, gv.String())
			if err != nil {
				return err
			}
			for _, r := range list.APIResources {
				if r.Name == crd.Spec.Names.Plural {
					return nil
				}
			}
			return fmt.Errorf("%s not yet served", crd.Spec.Names.Plural)
		}); err != nil {
			return fmt.Errorf("wait for CRD %s to be served in %s: %w", crd.Name, gv, err)
		}
	}
	return nil
}

// applyCRD creates crd, or updates the CRD of that name to it when the
// storage already has one (a server restarted on etcd), as envtest's
// CreateCRDs does.
func applyCRD(ctx context.Context, crds apiextensionsclientv1.CustomResourceDefinitionInterface,
	crd *apiextensionsv1.CustomResourceDefinition) error {
	_, err := crds.Create(ctx, crd.DeepCopy(), metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	return clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		existing, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		update := crd.DeepCopy()
		update.ResourceVersion = existing.ResourceVersion
		_, err = crds.Update(ctx, update, metav1.UpdateOptions{})
		return err
	})
}

// establishedAge is how old the Established condition of a CRD installed
// through Options is made. apiextensions delays the first create of a custom
// resource by 2 s when its CRD became Established less than 2 s earlier, so
// that other API servers of an HA cluster can catch up; this server has no
// peers, and nothing could use the CRD before Start returned.
const establishedAge = 2*time.Second + 100*time.Millisecond

// waitEstablished watches the CRD until Established, then backdates that
// condition.
func (in crdInstaller) waitEstablished(ctx context.Context, name string) error {
	list, err := in.crds.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return err
	}
	crd := (*apiextensionsv1.CustomResourceDefinition)(nil)
	if len(list.Items) == 1 {
		crd = &list.Items[0]
	}
	if crd == nil || !established(crd) {
		w, err := in.crds.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: list.ResourceVersion,
		})
		if err != nil {
			return err
		}
		defer w.Stop()
		for crd == nil || !established(crd) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("wait for CRD %s to be established: %w", name, ctx.Err())
			case ev, ok := <-w.ResultChan():
				if !ok {
					return fmt.Errorf("wait for CRD %s to be established: watch closed", name)
				}
				if ev.Type == watch.Error {
					return fmt.Errorf("wait for CRD %s to be established: %v", name, apierrors.FromObject(ev.Object))
				}
				if c, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition); ok {
					crd = c
				}
			}
		}
	}
	return in.backdateEstablished(ctx, name)
}

// backdateEstablished moves the CRD's Established condition establishedAge
// into the past, and waits until the custom resource handler has seen it.
func (in crdInstaller) backdateEstablished(ctx context.Context, name string) error {
	crdClient := in.crds
	// Controllers of the apiextensions tier update the status too; retry on
	// conflicts with them.
	err := clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		cur, err := crdClient.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range cur.Status.Conditions {
			c := &cur.Status.Conditions[i]
			if c.Type == apiextensionsv1.Established && time.Since(c.LastTransitionTime.Time) < establishedAge {
				c.LastTransitionTime = metav1.NewTime(c.LastTransitionTime.Add(-establishedAge))
			}
		}
		if _, err := crdClient.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("backdate Established condition of CRD %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The custom resource handler reads CRDs from its informer: wait until it
	// has seen the backdated condition.
	return retry.Until(ctx, func(context.Context) error {
		crd, err := in.lister.Get(name)
		if err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && time.Since(c.LastTransitionTime.Time) >= establishedAge-100*time.Millisecond {
				return nil
			}
		}
		return fmt.Errorf("CRD %s: backdated condition not yet observed", name)
	})
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// installRBAC creates the objects of Options.RBACPaths, and the namespaces
// they are in when missing (kubebuilder's manifests name the namespace
// "system", which kustomize would rename): created, or updated when they
// exist. The server's own validation and RBAC checks apply, as to kubectl
// apply by an admin.
func installRBAC(ctx context.Context, admin *rest.Config, objs []*unstructured.Unstructured) error {
	if len(objs) == 0 {
		return nil
	}
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		return err
	}
	namespaces, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	var errs []error
	for _, obj := range objs {
		obj = obj.DeepCopy()
		if err := ensureNamespace(ctx, namespaces, obj.GetNamespace()); err != nil {
			errs = append(errs, err)
			continue
		}
		gvr, _ := manifests.RBACResource(obj.GroupVersionKind()) // read by manifests.RBAC
		client := dyn.Resource(gvr).Namespace(obj.GetNamespace())
		_, err := client.Create(ctx, obj, metav1.CreateOptions{FieldManager: "kubeembed"})
		if apierrors.IsAlreadyExists(err) {
			var have *unstructured.Unstructured
			if have, err = client.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
				obj.SetResourceVersion(have.GetResourceVersion())
				_, err = client.Update(ctx, obj, metav1.UpdateOptions{FieldManager: "kubeembed"})
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("RBACPaths: %s %s: %w", obj.GetKind(), namespacedName(obj), err))
		}
	}
	return errors.Join(errs...)
}

func ensureNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	if name == "" {
		return nil
	}
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func namespacedName(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
