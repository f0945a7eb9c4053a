// Package scheduling serves scheduling.k8s.io/v1 priorityclasses, with the
// two system classes every cluster has.
package scheduling

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver/internal/retry"
	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Priorities of the system classes and the highest a user class may have.
const (
	HighestUserDefinablePriority = 1000000000
	SystemCriticalPriority       = 2 * HighestUserDefinablePriority
	systemPrefix                 = "system-"
)

// PostStartHook implements providers.PostStartHookProvider: the system
// priority classes are created when a server starts, as kube-apiserver's
// hook of the same name does.
func (Provider) PostStartHook(providers.Config) (string, genericapiserver.PostStartHookFunc, error) {
	return "scheduling/bootstrap-system-priority-classes", func(ctx genericapiserver.PostStartHookContext) error {
		client, err := kubernetes.NewForConfig(ctx.LoopbackClientConfig)
		if err != nil {
			return err
		}
		for _, pc := range systemPriorityClasses() {
			if err := retry.Ensure(ctx, func(c context.Context) error {
				_, err := client.SchedulingV1().PriorityClasses().Create(c, pc, metav1.CreateOptions{})
				return err
			}); err != nil {
				return fmt.Errorf("create priority class %s: %w", pc.Name, err)
			}
		}
		return nil
	}, nil
}

func systemPriorityClasses() []*schedulingv1.PriorityClass {
	return []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: SystemCriticalPriority + 1000,
			Description: "Used for system critical pods that must not be moved from their current node."},
		{ObjectMeta: metav1.ObjectMeta{Name: "system-cluster-critical"}, Value: SystemCriticalPriority,
			Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."},
	}
}

// Provider serves scheduling.k8s.io.
type Provider struct{}

var _ providers.Provider = Provider{}

// GroupName implements providers.Provider.
func (Provider) GroupName() string { return schedulingv1.GroupName }

// Install implements providers.Provider.
func (Provider) Install(scheme *runtime.Scheme) error {
	if err := providers.InstallGroupVersion(scheme, schedulingv1.SchemeGroupVersion, schedulingv1.AddToScheme); err != nil {
		return err
	}
	scheme.AddTypeDefaultingFunc(&schedulingv1.PriorityClass{}, func(obj any) {
		pc := obj.(*schedulingv1.PriorityClass)
		if pc.PreemptionPolicy == nil {
			p := corev1.PreemptLowerPriority
			pc.PreemptionPolicy = &p
		}
	})
	return registry.FieldLabelConversion(scheme, schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"), false)
}

func validate(pc *schedulingv1.PriorityClass) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&pc.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if strings.HasPrefix(pc.Name, systemPrefix) {
		known := false
		for _, sys := range systemPriorityClasses() {
			if sys.Name == pc.Name {
				known = true
				if pc.Value != sys.Value {
					errs = append(errs, field.Forbidden(field.NewPath("value"), fmt.Sprintf("value of %s must be %d", pc.Name, sys.Value)))
				}
			}
		}
		if !known {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"),
				fmt.Sprintf("priority class names with '%s' prefix are reserved for system use only. error: %s is not a known system priority class", systemPrefix, pc.Name)))
		}
	} else if pc.Value > HighestUserDefinablePriority {
		errs = append(errs, field.Forbidden(field.NewPath("value"), fmt.Sprintf("maximum allowed value of a user defined priority is %v", HighestUserDefinablePriority)))
	}
	return errs
}

// Storage implements providers.Provider.
func (Provider) Storage(ctx providers.Config) (map[string]map[string]rest.Storage, error) {
	st := &registry.Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Generation: true}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		return validate(obj.(*schedulingv1.PriorityClass))
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		pc, o := obj.(*schedulingv1.PriorityClass), old.(*schedulingv1.PriorityClass)
		var errs field.ErrorList
		errs = append(errs, apivalidation.ValidateImmutableField(pc.Value, o.Value, field.NewPath("value"))...)
		return append(errs, apivalidation.ValidateImmutableField(pc.PreemptionPolicy, o.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
	}
	col := func(name, typ string, f func(*schedulingv1.PriorityClass) any) registry.Column {
		field := map[string]string{"Value": "value", "Global-Default": "globalDefault", "PreemptionPolicy": "preemptionPolicy"}[name]
		return registry.Column{TableColumnDefinition: metav1.TableColumnDefinition{Name: name, Type: typ, Description: schedulingv1.PriorityClass{}.SwaggerDoc()[field]},
			Value: func(o runtime.Object) any { return f(o.(*schedulingv1.PriorityClass)) }}
	}
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: schedulingv1.Resource("priorityclasses"), Singular: "priorityclass",
		NewFunc:  func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewList:  func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		Strategy: st, ShortNames: []string{"pc"},
		Table: registry.Table(registry.NameColumn(),
			col("Value", "integer", func(pc *schedulingv1.PriorityClass) any { return int64(pc.Value) }),
			col("Global-Default", "boolean", func(pc *schedulingv1.PriorityClass) any { return pc.GlobalDefault }),
			registry.AgeColumn(),
			col("PreemptionPolicy", "string", func(pc *schedulingv1.PriorityClass) any {
				if pc.PreemptionPolicy == nil {
					return ""
				}
				return string(*pc.PreemptionPolicy)
			}),
		),
		AttrFunc: registry.AttrFunc[*schedulingv1.PriorityClass](false, nil),
	})
	if err != nil {
		return nil, err
	}
	return map[string]map[string]rest.Storage{"v1": {"priorityclasses": store}}, nil
}
