// Package validatingadmissionpolicystatus is kube-controller-manager's
// validatingadmissionpolicy-status controller: each ValidatingAdmissionPolicy
// whose generation it has not yet observed gets its expressions type-checked
// against the schemas of the kinds it matches (and of its paramKind), and a
// status written by server-side apply with the field manager
// validatingadmissionpolicy-status: status.observedGeneration, and
// status.typeChecking.expressionWarnings, one per spec.validations[*]
// expression or messageExpression that does not compile against some kind.
//
// The type checker is k8s.io/apiserver's, as upstream's: the kinds come from
// a discovery RESTMapper (at most ten, no wildcards), their schemas from the
// built-in types' OpenAPI definitions, else from the server's /openapi/v3
// (custom resources). The definitions are indexed once per process, when
// the first policy of any server needs them: it takes about 20 ms (measured
// on the 2-core dev machine), which a server with no policy never pays.
package validatingadmissionpolicystatus

import (
	"context"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	admissionregistrationv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	k8sscheme "k8s.io/client-go/kubernetes/scheme"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	admissionregistrationv1listers "k8s.io/client-go/listers/admissionregistration/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/openapi"
)

// FieldManager is the manager of the status the controller applies, and
// its queue's name, as upstream names both.
const FieldManager = "validatingadmissionpolicy-status"

// workers is kube-controller-manager's default
// --concurrent-validating-admission-policy-status-syncs.
const workers = 5

// Controller is the validatingadmissionpolicy-status controller.
type Controller struct {
	controller.Parts
	client   admissionregistrationv1client.ValidatingAdmissionPolicyInterface
	policies admissionregistrationv1listers.ValidatingAdmissionPolicyLister
	queue    *controller.Queue
	// checker is built by the first sync that checks a policy.
	checker func() *validating.TypeChecker
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	informer := cfg.Informers.Admissionregistration().V1().ValidatingAdmissionPolicies()
	c := &Controller{client: cfg.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies(), policies: informer.Lister(),
		queue: controller.NewQueue(FieldManager, cfg.QueueMetrics), checker: sync.OnceValue(func() *validating.TypeChecker {
			return newTypeChecker(cfg.Discovery)
		})}
	c.Name, c.Observer, c.Queues = string(controllers.ValidatingAdmissionPolicyStatus), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	// As upstream: additions and updates (a status write too, which finds
	// the generation observed); a deleted policy has no status to keep.
	err := c.Observer.Watch(admissionregistrationv1.Resource("validatingadmissionpolicies"), informer.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	})
	return c, err
}

// newTypeChecker is upstream's: the kinds a policy matches found through
// discovery, their schemas in the built-in definitions, else in the
// server's OpenAPI v3 (discovery's client is not cached, so a CRD's schema
// is read as served now).
func newTypeChecker(d discovery.DiscoveryInterface) *validating.TypeChecker {
	return &validating.TypeChecker{
		SchemaResolver: builtins().Combine(&resolver.ClientDiscoveryResolver{Discovery: d}),
		RestMapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d)),
	}
}

// builtins resolves the schemas of the built-in kinds, from the OpenAPI
// definitions the server serves, named by the kinds of client-go's and
// apiextensions' schemes, as kube-controller-manager's. Read-only once
// built, it is shared by the process's servers.
var builtins = sync.OnceValue(func() *resolver.DefinitionsSchemaResolver {
	return resolver.NewDefinitionsSchemaResolver(openapi.GetOpenAPIDefinitions, k8sscheme.Scheme, apiextensionsscheme.Scheme)
})

// Run syncs policies with upstream's five workers until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, workers, c.sync)
}

func (c *Controller) enqueue(obj any) {
	if p, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
		c.queue.Add(p.Name)
	}
}

// sync checks a policy whose generation is not observed yet and applies
// its status.
func (c *Controller) sync(ctx context.Context, name string) error {
	policy, err := c.policies.Get(name)
	if apierrors.IsNotFound(err) {
		return nil // deleted
	}
	if err != nil || policy.Generation <= policy.Status.ObservedGeneration {
		return err
	}
	warnings := c.checker().Check(policy)
	applied := make([]*admissionregistrationv1ac.ExpressionWarningApplyConfiguration, 0, len(warnings))
	for _, w := range warnings {
		applied = append(applied, admissionregistrationv1ac.ExpressionWarning().WithFieldRef(w.FieldRef).WithWarning(w.Warning))
	}
	status := admissionregistrationv1ac.ValidatingAdmissionPolicyStatus().WithObservedGeneration(policy.Generation).
		WithTypeChecking(admissionregistrationv1ac.TypeChecking().WithExpressionWarnings(applied...))
	_, err = c.client.ApplyStatus(ctx, admissionregistrationv1ac.ValidatingAdmissionPolicy(policy.Name).WithStatus(status),
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return err
}
