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
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

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

// bootstrapPriorityClasses creates the system priority classes when a
// server starts, as kube-apiserver's hook of the same name does.
func bootstrapPriorityClasses(providers.Config) genericapiserver.PostStartHookFunc {
	return func(ctx genericapiserver.PostStartHookContext) error {
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
	}
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
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: schedulingv1.SchemeGroupVersion, AddToScheme: schedulingv1.AddToScheme,
	Served: []registry.Served{priorityClasses},
	Hooks: map[string]registry.Hook{
		"scheduling/bootstrap-system-priority-classes": registry.ConfigHook(bootstrapPriorityClasses),
	},
}

func validate(pc *schedulingv1.PriorityClass) field.ErrorList {
	var errs field.ErrorList
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

var priorityClasses = registry.Kind[*schedulingv1.PriorityClass]{
	Default: func(pc *schedulingv1.PriorityClass) {
		if pc.PreemptionPolicy == nil {
			pc.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
		}
	},
	GroupVersion: schedulingv1.SchemeGroupVersion, Resource: "priorityclasses", Singular: "priorityclass",
	ShortNames: []string{"pc"}, Generation: true,
	NewObj:   func() runtime.Object { return &schedulingv1.PriorityClass{} },
	NewList:  func() runtime.Object { return &schedulingv1.PriorityClassList{} },
	Validate: validate,
	ValidateUpdate: func(pc, old *schedulingv1.PriorityClass) field.ErrorList {
		errs := apivalidation.ValidateImmutableField(pc.Value, old.Value, field.NewPath("value"))
		return append(errs, apivalidation.ValidateImmutableField(pc.PreemptionPolicy, old.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
	},
	NoAge: true,
	Columns: []registry.Column{
		registry.ColumnOf("Value", "integer", pcDoc["value"], 0, func(pc *schedulingv1.PriorityClass) any { return int64(pc.Value) }),
		registry.ColumnOf("Global-Default", "boolean", pcDoc["globalDefault"], 0, func(pc *schedulingv1.PriorityClass) any { return pc.GlobalDefault }),
		registry.AgeColumn(),
		registry.ColumnOf("PreemptionPolicy", "string", pcDoc["preemptionPolicy"], 0, func(pc *schedulingv1.PriorityClass) any {
			if pc.PreemptionPolicy == nil {
				return ""
			}
			return string(*pc.PreemptionPolicy)
		}),
	},
}

var pcDoc = schedulingv1.PriorityClass{}.SwaggerDoc()
