// Package flowcontrol serves flowcontrol.apiserver.k8s.io/v1 flow schemas
// and priority level configurations, with status, and creates and keeps
// kube-apiserver's bootstrap configuration (producer.go), which the server's
// API Priority and Fairness filter applies.
package flowcontrol

import (
	"cmp"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

var gv = flowcontrolv1.SchemeGroupVersion

func i32(v int32) *int32 { return &v }

// Provider serves flowcontrol.apiserver.k8s.io.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: gv, AddToScheme: flowcontrolv1.AddToScheme,
	Served: []registry.Served{flowSchemas, priorityLevels},
	Hooks: map[string]registry.Hook{
		"priority-and-fairness-config-producer": registry.ConfigHook(configProducer),
	},
}

var flowSchemas = registry.Kind[*flowcontrolv1.FlowSchema]{
	Default: func(o *flowcontrolv1.FlowSchema) {
		if fs := o; fs.Spec.MatchingPrecedence == 0 {
			fs.Spec.MatchingPrecedence = 1000
		}
	},
	GroupVersion: gv, Resource: "flowschemas", Singular: "flowschema", Generation: true, Status: true,
	NewObj:  func() runtime.Object { return &flowcontrolv1.FlowSchema{} },
	NewList: func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
	// As kube-apiserver's strategy, an update is validated as a create
	// (validation.go).
	Validate:       validateFlowSchema,
	ValidateStatus: validateFlowSchemaStatus,
	Columns: []registry.Column{
		registry.ColumnOf("PriorityLevel", "string", flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"], 0, func(fs *flowcontrolv1.FlowSchema) any { return fs.Spec.PriorityLevelConfiguration.Name }),
		registry.ColumnOf("MatchingPrecedence", "string", flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["matchingPrecedence"], 0, func(fs *flowcontrolv1.FlowSchema) any { return int64(fs.Spec.MatchingPrecedence) }),
		registry.ColumnOf("DistinguisherMethod", "string", flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["distinguisherMethod"], 0, func(fs *flowcontrolv1.FlowSchema) any {
			if fs.Spec.DistinguisherMethod == nil {
				return "<none>"
			}
			return string(fs.Spec.DistinguisherMethod.Type)
		}),
		registry.AgeColumn(),
		registry.ColumnOf("MissingPL", "string", "references a broken or non-existent PriorityLevelConfiguration", 0, func(fs *flowcontrolv1.FlowSchema) any {
			for _, c := range fs.Status.Conditions {
				if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
					return string(c.Status)
				}
			}
			return "?"
		}),
	},
	NoAge: true,
	// A list prints by matching precedence, then name.
	ListOrder: func(a, b *flowcontrolv1.FlowSchema) int {
		if c := cmp.Compare(a.Spec.MatchingPrecedence, b.Spec.MatchingPrecedence); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	},
}

var priorityLevels = registry.Kind[*flowcontrolv1.PriorityLevelConfiguration]{
	Default: func(o *flowcontrolv1.PriorityLevelConfiguration) {
		s := &o.Spec
		if l := s.Limited; l != nil {
			if l.NominalConcurrencyShares == nil {
				l.NominalConcurrencyShares = i32(30)
			}
			if l.LendablePercent == nil {
				l.LendablePercent = i32(0)
			}
			// Only a queuing block given is completed, as upstream's
			// defaulter: a Queue response without one is refused.
			if q := l.LimitResponse.Queuing; q != nil {
				if q.Queues == 0 {
					q.Queues = 64
				}
				if q.HandSize == 0 {
					q.HandSize = 8
				}
				if q.QueueLengthLimit == 0 {
					q.QueueLengthLimit = 50
				}
			}
		}
		if e := s.Exempt; e != nil {
			if e.NominalConcurrencyShares == nil {
				e.NominalConcurrencyShares = i32(0)
			}
			if e.LendablePercent == nil {
				e.LendablePercent = i32(0)
			}
		}
	},
	GroupVersion: gv, Resource: "prioritylevelconfigurations", Singular: "prioritylevelconfiguration", Generation: true, Status: true,
	NewObj:  func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
	NewList: func() runtime.Object { return &flowcontrolv1.PriorityLevelConfigurationList{} },
	// As kube-apiserver's strategy, an update is validated as a create
	// (validation.go).
	Validate:       validatePriorityLevel,
	ValidateStatus: validatePriorityLevelStatus,
	Columns: []registry.Column{
		registry.ColumnOf("Type", "string", flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"], 0, func(pl *flowcontrolv1.PriorityLevelConfiguration) any { return string(pl.Spec.Type) }),
		registry.ColumnOf("NominalConcurrencyShares", "string", flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"], 0, func(pl *flowcontrolv1.PriorityLevelConfiguration) any {
			if l := pl.Spec.Limited; l != nil {
				return int64(ptr.Deref(l.NominalConcurrencyShares, 0))
			}
			return "<none>"
		}),
		queuing("Queues", "queues", func(q *flowcontrolv1.QueuingConfiguration) int32 { return q.Queues }),
		queuing("HandSize", "handSize", func(q *flowcontrolv1.QueuingConfiguration) int32 { return q.HandSize }),
		queuing("QueueLengthLimit", "queueLengthLimit", func(q *flowcontrolv1.QueuingConfiguration) int32 { return q.QueueLengthLimit }),
	},
}

func queuing(name, field string, f func(*flowcontrolv1.QueuingConfiguration) int32) registry.Column {
	return registry.ColumnOf(name, "string", flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()[field], 0, func(pl *flowcontrolv1.PriorityLevelConfiguration) any {
		if l := pl.Spec.Limited; l != nil && l.LimitResponse.Queuing != nil {
			return int64(f(l.LimitResponse.Queuing))
		}
		return "<none>"
	})
}
