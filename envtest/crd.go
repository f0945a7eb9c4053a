package envtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/kubeembed/apiserver/internal/manifests"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
	"sigs.k8s.io/yaml"
)

// CRDInstallOptions are the options for installing CRDs (envtest's).
type CRDInstallOptions struct {
	// Scheme decides which CRDs get a conversion webhook: those whose types
	// in it implement Hub and Convertible. Default scheme.Scheme.
	Scheme *runtime.Scheme
	// Paths are directories or files of CRDs (YAML or JSON, multi-document).
	Paths []string
	// CRDs are CRDs to install.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// ErrorIfPathMissing makes a missing path an error.
	ErrorIfPathMissing bool
	// MaxTime bounds the wait for the CRDs to be served (default 10 s);
	// PollInterval is the interval of its checks (default 100 ms).
	MaxTime      time.Duration
	PollInterval time.Duration
	// CleanUpAfterUse uninstalls the CRDs at Environment.Stop.
	CleanUpAfterUse bool
	// WebhookOptions locate the webhook server that converts; Start
	// copies the Environment's WebhookInstallOptions here.
	WebhookOptions WebhookInstallOptions
}

const (
	defaultPollInterval = 100 * time.Millisecond
	defaultMaxWait      = 10 * time.Second
)

// InstallCRDs reads the CRD files of options, creates (or updates) the CRDs
// and waits until discovery serves them.
func InstallCRDs(config *rest.Config, options CRDInstallOptions) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	defaultCRDOptions(&options)
	if err := ReadCRDFiles(&options); err != nil {
		return nil, fmt.Errorf("unable to read CRD files: %w", err)
	}
	if err := modifyConversionWebhooks(options.CRDs, options.Scheme, options.WebhookOptions); err != nil {
		return nil, err
	}
	if err := CreateCRDs(config, options.CRDs); err != nil {
		return options.CRDs, fmt.Errorf("unable to create CRD instances: %w", err)
	}
	if err := WaitForCRDs(config, options.CRDs, options); err != nil {
		return options.CRDs, fmt.Errorf("something went wrong waiting for CRDs to appear as API resources: %w", err)
	}
	return options.CRDs, nil
}

func defaultCRDOptions(o *CRDInstallOptions) {
	if o.Scheme == nil {
		o.Scheme = scheme.Scheme
	}
	if o.MaxTime == 0 {
		o.MaxTime = defaultMaxWait
	}
	if o.PollInterval == 0 {
		o.PollInterval = defaultPollInterval
	}
}

// ReadCRDFiles appends the CRDs of options.Paths to options.CRDs.
func ReadCRDFiles(options *CRDInstallOptions) error {
	if len(options.Paths) == 0 {
		return nil
	}
	crds, err := renderCRDs(options)
	if err != nil {
		return err
	}
	options.CRDs = append(options.CRDs, crds...)
	return nil
}

// renderCRDs reads the CRDs of every path: the .json, .yaml and .yml files
// of a directory (not its subdirectories), or a file. A CRD read twice
// (same kind, version and name) keeps the last definition, as envtest.
func renderCRDs(options *CRDInstallOptions) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	type key struct {
		gvk  schema.GroupVersionKind
		name string
	}
	var order []key
	byKey := map[key]*apiextensionsv1.CustomResourceDefinition{}
	for _, path := range options.Paths {
		files, err := manifests.Files(path)
		if errors.Is(err, os.ErrNotExist) && !options.ErrorIfPathMissing {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			crds, err := readCRDs(f)
			if err != nil {
				return nil, err
			}
			for _, crd := range crds {
				k := key{crd.GroupVersionKind(), crd.Name}
				if byKey[k] == nil {
					order = append(order, k)
				}
				byKey[k] = crd
			}
		}
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(order))
	for _, k := range order {
		out = append(out, byKey[k])
	}
	return out, nil
}

// readCRDs returns the CRDs of a file, skipping its other documents.
func readCRDs(file string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	docs, err := manifests.Read(file)
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, doc := range docs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc.Raw, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if crd.Kind != "CustomResourceDefinition" || crd.Spec.Names.Kind == "" || crd.Spec.Group == "" {
			continue
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// WaitForCRDs waits until discovery serves every served version of the
// CRDs, checking every options.PollInterval for at most options.MaxTime.
func WaitForCRDs(config *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition, options CRDInstallOptions) error {
	defaultCRDOptions(&options)
	waiting := map[schema.GroupVersion]sets.Set[string]{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
			if waiting[gv] == nil {
				waiting[gv] = sets.New[string]()
			}
			waiting[gv].Insert(crd.Spec.Names.Plural)
		}
	}
	d, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(context.Background(), options.PollInterval, options.MaxTime, true,
		func(context.Context) (bool, error) { return served(d, waiting), nil })
}

// served removes from waiting what discovery serves, and says whether
// nothing is left.
func served(d discovery.DiscoveryInterface, waiting map[schema.GroupVersion]sets.Set[string]) bool {
	for gv, resources := range waiting {
		list, err := d.ServerResourcesForGroupVersion(gv.String())
		if err != nil {
			return false // not yet
		}
		for _, r := range list.APIResources {
			resources.Delete(r.Name)
		}
		if resources.Len() > 0 {
			return false
		}
		delete(waiting, gv)
	}
	return true
}

// UninstallCRDs deletes the CRDs of options (and of its paths); a CRD
// already gone is not an error.
func UninstallCRDs(config *rest.Config, options CRDInstallOptions) error {
	if err := ReadCRDFiles(&options); err != nil {
		return err
	}
	c, err := client.New(config, client.Options{})
	if err != nil {
		return err
	}
	for _, crd := range options.CRDs {
		if err := c.Delete(context.Background(), crd); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// CreateCRDs creates the CRDs, or updates those that exist.
func CreateCRDs(config *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	c, err := client.New(config, client.Options{})
	if err != nil {
		return fmt.Errorf("unable to create client: %w", err)
	}
	ctx := context.Background()
	for _, crd := range crds {
		existing := crd.DeepCopy()
		err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, existing)
		switch {
		case apierrors.IsNotFound(err):
			if err := c.Create(ctx, crd); err != nil {
				return fmt.Errorf("unable to create CRD %q: %w", crd.Name, err)
			}
		case err != nil:
			return fmt.Errorf("unable to get CRD %q to check if it exists: %w", crd.Name, err)
		default:
			if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
				if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, existing); err != nil {
					return err
				}
				crd.ResourceVersion = existing.ResourceVersion
				return c.Update(ctx, crd)
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// modifyConversionWebhooks points the conversion of every CRD whose kind
// is convertible in s (Hub and Convertible types) at the webhook server's
// /convert, trusting its CA, and drops the conversion of the others (the
// service reference controller-gen's patches leave cannot be reached);
// CRDs that preserve unknown fields are left alone. Nothing changes until
// the webhook server's certificate exists.
func modifyConversionWebhooks(crds []*apiextensionsv1.CustomResourceDefinition, s *runtime.Scheme, webhooks WebhookInstallOptions) error {
	if len(webhooks.LocalServingCAData) == 0 {
		return nil
	}
	convertible, err := convertibleKinds(s)
	if err != nil {
		return err
	}
	hostPort, err := webhooks.generateHostPort()
	if err != nil {
		return err
	}
	url := "https://" + hostPort + "/convert"
	for _, crd := range crds {
		if crd.Spec.PreserveUnknownFields {
			continue
		}
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		if !webhooks.IgnoreSchemeConvertible && !convertible.Has(gk) {
			crd.Spec.Conversion = nil
			continue
		}
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: webhooks.LocalServingCAData},
				ConversionReviewVersions: []string{"v1", "v1beta1"},
			},
		}
	}
	return nil
}

// convertibleKinds are the kinds of s with a hub and convertible spokes.
func convertibleKinds(s *runtime.Scheme) (sets.Set[schema.GroupKind], error) {
	out := sets.New[schema.GroupKind]()
	for gvk := range s.AllKnownTypes() {
		obj, err := s.New(gvk)
		if err != nil {
			return nil, err
		}
		if ok, err := conversion.IsConvertible(s, obj); ok && err == nil {
			out.Insert(gvk.GroupKind())
		}
	}
	return out, nil
}

// mergePaths is the union of two lists of paths, first ones first.
func mergePaths(a, b []string) []string {
	out := slices.Clone(a)
	for _, p := range b {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// mergeCRDs is the union of two lists of CRDs by name (b's wins), copied.
func mergeCRDs(a, b []*apiextensionsv1.CustomResourceDefinition) []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	index := map[string]int{}
	for _, crd := range slices.Concat(a, b) {
		if i, ok := index[crd.Name]; ok {
			out[i] = crd.DeepCopy()
			continue
		}
		index[crd.Name] = len(out)
		out = append(out, crd.DeepCopy())
	}
	return out
}
