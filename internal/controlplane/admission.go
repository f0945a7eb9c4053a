package controlplane

import (
	"fmt"
	"math"

	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	mutatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	resourcequotaapi "k8s.io/apiserver/pkg/admission/plugin/resourcequota/apis/resourcequota"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	mutatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	validatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/utils/clock"

	kubeadmission "github.com/kubeembed/apiserver/internal/admission"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/globals"
	kubequota "github.com/kubeembed/apiserver/internal/quota"
	"github.com/kubeembed/apiserver/internal/writes"
)

// newAdmission returns the admission chain in kube-apiserver's order:
// namespace lifecycle (no objects in missing or terminating namespaces, no
// deleting the system namespaces), limit ranges (defaults, then bounds),
// the pod plugins (service account unless serviceAccount is false, as
// envtest disables it; priority, default tolerations), the default storage
// class of claims, mutating admission policies and webhooks,
// then validating admission policies and webhooks, and resource quota last.
// Webhooks are called at their URL, or at an endpoint of their Service
// (services: serviceResolver). The plugins use the informers of inf, and the
// policy plugins run controllers until inf shuts down; it also returns the
// informers the plugins need synced before they admit anything.
func newAdmission(loopback *rest.Config, inf *informerSet, log *writes.Log, authz authorizer.Authorizer, version basecompatibility.EffectiveVersion,
	services webhook.ServiceResolver, serviceAccount bool) (admission.Interface, []cache.InformerSynced, error) {
	client, dyn := inf.client, inf.dynClient
	nsLifecycle, err := lifecycle.NewLifecycle(sets.New(metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic))
	if err != nil {
		return nil, nil, err
	}
	mutatingHooks, err := mutatingwebhook.NewMutatingWebhook(nil)
	if err != nil {
		return nil, nil, err
	}
	validatingHooks, err := validatingwebhook.NewValidatingAdmissionWebhook(nil)
	if err != nil {
		return nil, nil, err
	}
	// Policies find the kinds of their parameters through discovery, which
	// is reset as CRDs come and go.
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	inits := admission.PluginInitializers{
		initializer.New(client, dyn, inf.kube, authz, globals.Features(), version, inf.done(), mapper),
		webhookinit.NewPluginInitializer(
			webhook.NewDefaultAuthenticationInfoResolverWrapper(serviceTransport(), nil, loopback, noopoteltrace.NewTracerProvider()),
			services),
	}
	var quotaConfig *resourcequotaapi.Configuration // kube-apiserver's default: no resource limited without a quota
	quotas, err := resourcequota.NewResourceQuota(quotaConfig, 5)
	if err != nil {
		return nil, nil, err
	}
	dra := kubequota.DRA{
		Classes: inf.kube.Resource().V1().DeviceClasses().Lister(),
		Pods:    inf.kube.Core().V1().Pods().Lister(), Claims: inf.kube.Resource().V1().ResourceClaims().Lister(),
	}
	inits = append(inits, quotaInitializer{kubequota.Configuration(nil, clock.RealClock{}, dra)})
	for _, p := range []admission.Interface{nsLifecycle, mutatingHooks, validatingHooks, quotas} {
		if err := initialize(inits, p); err != nil {
			return nil, nil, fmt.Errorf("admission plugin %T: %w", p, err)
		}
	}
	limits, pods, err := podPlugins(client, inf.kube, log, serviceAccount)
	if err != nil {
		return nil, nil, err
	}
	quotaInformer := inf.kube.Core().V1().ResourceQuotas()
	freshQuotas, err := freshLister(log, corev1.Resource("resourcequotas"), quotaInformer.Informer(), quotaInformer.Lister())
	if err != nil {
		return nil, nil, err
	}
	nodeInformer := inf.kube.Core().V1().Nodes()
	freshNodes, err := freshLister(log, corev1.Resource("nodes"), nodeInformer.Informer(), nodeInformer.Lister())
	if err != nil {
		return nil, nil, err
	}
	nodes := kubeadmission.Nodes{Lister: freshNodes, Client: client}
	mutatingPolicies, validatingPolicies := policyPlugins(inits, inf)
	// The webhook and policy plugins refuse requests until their
	// configurations' informers have synced, namespace lifecycle and quota
	// need theirs.
	v1 := inf.kube.Admissionregistration().V1()
	synced := []cache.InformerSynced{
		v1.MutatingWebhookConfigurations().Informer().HasSynced, v1.ValidatingWebhookConfigurations().Informer().HasSynced,
		v1.ValidatingAdmissionPolicies().Informer().HasSynced, v1.MutatingAdmissionPolicies().Informer().HasSynced,
		inf.kube.Core().V1().Namespaces().Informer().HasSynced, inf.kube.Core().V1().ResourceQuotas().Informer().HasSynced,
		inf.kube.Core().V1().Nodes().Informer().HasSynced,
		// Quota's resource claim evaluator.
		inf.kube.Resource().V1().DeviceClasses().Informer().HasSynced, inf.kube.Core().V1().Pods().Informer().HasSynced,
		inf.kube.Resource().V1().ResourceClaims().Informer().HasSynced,
	}
	return admission.NewChainHandler(nsLifecycle, limits, pods,
		kubeadmission.NewDefaultStorageClass(client), kubeadmission.NewPodTopologyLabels(inf.kube.Core().V1().Nodes().Lister()),
		kubeadmission.NewPersistentVolumeClaimResize(client),
		kubeadmission.NewNodeDeclaredFeatureValidator(nodes), kubeadmission.NewPodResizeValidator(nodes), mutatingPolicies, mutatingHooks, validatingPolicies, validatingHooks, kubeadmission.WhereQuotas(quotas, quotaConfig, freshQuotas)), synced, nil
}

// freshLister returns lister as admission's read-your-writes view of
// resource gr (kubeadmission.Fresh): fresh while informer's store holds
// every write to gr the server has made, as the writes log tells. One
// window is left, after an informer lists again (a Server.Restore ends
// watches with 410): client-go hands the listed objects over before the
// deletions the list implies, so for the microseconds between the two the
// store can hold the newest write and an object the restore deleted.
func freshLister[L any](log *writes.Log, gr schema.GroupResource, informer cache.SharedIndexInformer, lister L) (kubeadmission.Fresh[L], error) {
	seen := controller.NewObserver(log)
	if err := seen.Watch(gr, informer, cache.ResourceEventHandlerFuncs{}); err != nil {
		return kubeadmission.Fresh[L]{}, err
	}
	return kubeadmission.Fresh[L]{Lister: lister, Fresh: func() bool {
		return seen.ListersCaughtUpTo(map[schema.GroupResource]uint64{gr: log.Written(gr)}, math.MaxUint64) == nil
	}}, nil
}

// podPlugins are LimitRanger and the pod plugins, reading the server's
// informers where those hold every write.
func podPlugins(client kubernetes.Interface, inf informers.SharedInformerFactory, log *writes.Log, serviceAccount bool) (admission.Interface, admission.Interface, error) {
	limits, accounts, classes := inf.Core().V1().LimitRanges(), inf.Core().V1().ServiceAccounts(), inf.Scheduling().V1().PriorityClasses()
	ranges, err := freshLister(log, corev1.Resource("limitranges"), limits.Informer(), limits.Lister())
	if err != nil {
		return nil, nil, err
	}
	var listers kubeadmission.PodListers
	if listers.ServiceAccounts, err = freshLister(log, corev1.Resource("serviceaccounts"), accounts.Informer(), accounts.Lister()); err != nil {
		return nil, nil, err
	}
	if listers.PriorityClasses, err = freshLister(log, schedulingv1.Resource("priorityclasses"), classes.Informer(), classes.Lister()); err != nil {
		return nil, nil, err
	}
	return kubeadmission.NewLimitRanger(client, ranges), kubeadmission.NewPods(client, serviceAccount, listers), nil
}

// quotaInitializer gives the ResourceQuota plugin the core evaluators, as
// kube-apiserver's own initializer does; it runs after the generic one,
// whose drained notification the plugin needs first.
type quotaInitializer struct{ config quota.Configuration }

func (q quotaInitializer) Initialize(p admission.Interface) {
	if w, ok := p.(initializer.WantsQuotaConfiguration); ok {
		w.SetQuotaConfiguration(q.config)
	}
}

func initialize(inits admission.PluginInitializers, p admission.Interface) error {
	inits.Initialize(p)
	return admission.ValidateInitialization(p)
}

// policyPlugins returns the mutating and validating admission policy
// plugins, each built when the first policy of its kind exists
// (internal/admission.WhenAny): building them starts controllers and
// informers every request would otherwise pay for at start-up.
func policyPlugins(inits admission.PluginInitializers, inf *informerSet) (mutating, validating admission.Interface) {
	v1 := inf.kube.Admissionregistration().V1()
	lazily := func(newPlugin func() (admission.Interface, error), lister func() (int, error)) admission.Interface {
		return kubeadmission.WhenAny(func() (admission.Interface, error) {
			p, err := newPlugin()
			if err != nil {
				return nil, err
			}
			if err := initialize(inits, p); err != nil {
				return nil, err
			}
			inf.start() // the informers the plugin asked for
			return p, nil
		}, func() bool {
			n, err := lister()
			return err != nil || n > 0
		})
	}
	// Listers taken once: each Lister() call builds an informer value (and
	// the example object it is keyed by), ~2 KiB for every write.
	mutatingList, validatingList := v1.MutatingAdmissionPolicies().Lister(), v1.ValidatingAdmissionPolicies().Lister()
	mutating = lazily(func() (admission.Interface, error) { return mutatingpolicy.NewPlugin(nil) }, func() (int, error) {
		l, err := mutatingList.List(labels.Everything())
		return len(l), err
	})
	validating = lazily(func() (admission.Interface, error) { return validatingpolicy.NewPlugin(nil) }, func() (int, error) {
		l, err := validatingList.List(labels.Everything())
		return len(l), err
	})
	return mutating, validating
}
