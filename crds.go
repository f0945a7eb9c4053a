package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	clientretry "k8s.io/client-go/util/retry"

	"github.com/kubeembed/apiserver/internal/manifests"
	"github.com/kubeembed/apiserver/internal/retry"
)

// loadCRDs returns objs followed by the CRDs in paths (files, or directories
// whose YAML and JSON files are read in name order), reporting every bad file.
func loadCRDs(objs []*apiextensionsv1.CustomResourceDefinition, paths []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var errs []error
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(objs))
	for i, crd := range objs {
		if crd == nil {
			errs = append(errs, fmt.Errorf("options: CRDs[%d] is nil", i))
			continue
		}
		out = append(out, crd.DeepCopy())
	}
	for _, p := range paths {
		files, err := manifests.Files(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("options: CRDPaths: %w", err))
			continue
		}
		for _, f := range files {
			crds, err := readCRDs(f)
			if err != nil {
				errs = append(errs, fmt.Errorf("options: CRDPaths: %w", err))
				continue
			}
			out = append(out, crds...)
		}
	}
	seen := map[string]bool{}
	for _, crd := range out {
		if seen[crd.Name] {
			errs = append(errs, fmt.Errorf("options: CRD %q is given more than once", crd.Name))
		}
		seen[crd.Name] = true
	}
	return out, errors.Join(errs...)
}

// readCRDs reads the CRDs of a YAML or JSON file: anything else is an error
// naming the file and document.
func readCRDs(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	docs, err := readManifests(path)
	if err != nil {
		return nil, err
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(docs))
	for _, d := range docs {
		if d.Kind != "CustomResourceDefinition" || d.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
			return nil, fmt.Errorf("%s: document %d: %s %q is not an %s CustomResourceDefinition",
				path, d.doc, d.APIVersion, d.Kind, apiextensionsv1.SchemeGroupVersion)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := d.decode(crd); err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	return out, nil
}

// installCRDs creates the CRDs of Options and waits until each is Established
// and its resources are served.
func (s *Server) installCRDs(ctx context.Context) error {
	if len(s.opts.crds) == 0 {
		return nil
	}
	client, err := s.APIExtensionsClientset()
	if err != nil {
		return err
	}
	crdClient := client.ApiextensionsV1().CustomResourceDefinitions()
	var errs []error
	for _, crd := range s.opts.crds {
		if err := applyCRD(ctx, crdClient, crd); err != nil {
			errs = append(errs, fmt.Errorf("install CRD %s: %w", crd.Name, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, crd := range s.opts.crds {
		if err := s.waitEstablished(ctx, crd.Name); err != nil {
			return err
		}
	}
	disco, err := s.DiscoveryClient()
	if err != nil {
		return err
	}
	for _, crd := range s.opts.crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
			if err := retry.Until(ctx, func(ctx context.Context) error {
				list, err := discovery.ToDiscoveryInterfaceWithContext(disco).ServerResourcesForGroupVersionWithContext(ctx, gv.String())
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
	}
	return nil
}

// applyCRD creates crd, or updates the CRD of that name to it when the
// storage already has one (a server restarted on etcd), as envtest's
// CreateCRDs does.
func applyCRD(ctx context.Context, crds apiextensionsclient.CustomResourceDefinitionInterface,
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
func (s *Server) waitEstablished(ctx context.Context, name string) error {
	client, err := s.APIExtensionsClientset()
	if err != nil {
		return err
	}
	crdClient := client.ApiextensionsV1().CustomResourceDefinitions()
	list, err := crdClient.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return err
	}
	crd := (*apiextensionsv1.CustomResourceDefinition)(nil)
	if len(list.Items) == 1 {
		crd = &list.Items[0]
	}
	if crd == nil || !established(crd) {
		w, err := crdClient.Watch(ctx, metav1.ListOptions{
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
	return s.backdateEstablished(ctx, name)
}

// backdateEstablished moves the CRD's Established condition establishedAge
// into the past, and waits until the custom resource handler has seen it.
func (s *Server) backdateEstablished(ctx context.Context, name string) error {
	client, err := s.APIExtensionsClientset()
	if err != nil {
		return err
	}
	crdClient := client.ApiextensionsV1().CustomResourceDefinitions()
	// Controllers of the apiextensions tier update the status too; retry on
	// conflicts with them.
	err = clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
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
		crd, err := s.crdLister.Get(name)
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
