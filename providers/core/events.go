package core

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// EventTTL is how long events live in storage: kube-apiserver's --event-ttl
// default.
const EventTTL = 3600

var eventFields = []string{
	"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
	"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
	"reason", "reportingComponent", "source", "type",
}

// EventFields are the selectable fields of an event.
func EventFields(e *corev1.Event) fields.Set {
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}

// ValidateEvent checks what kube-apiserver checks of a core/v1 event.
func ValidateEvent(e *corev1.Event) field.ErrorList {
	errs := validateMeta(&e.ObjectMeta, true, registry.PathSegmentName)
	if e.InvolvedObject.Namespace != "" && e.InvolvedObject.Namespace != e.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("involvedObject", "namespace"), e.InvolvedObject.Namespace, "does not match event.namespace"))
	}
	if e.Type != "" && e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		errs = append(errs, field.NotSupported(field.NewPath("type"), e.Type, []string{corev1.EventTypeNormal, corev1.EventTypeWarning}))
	}
	return errs
}

// EventTable prints events as kubectl get events does.
func EventTable() rest.TableConvertor {
	c := func(name, typ, desc string, priority int32, v func(e *corev1.Event) any) registry.Column {
		d := col(name, typ, desc)
		d.Priority = priority
		return registry.Column{TableColumnDefinition: d, Value: func(o runtime.Object) any { return v(o.(*corev1.Event)) }}
	}
	return registry.Table(
		c("Last Seen", "string", "Time when last event occurred", 0, func(e *corev1.Event) any { return registry.Since(lastSeen(e)) }),
		c("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future.", 0, func(e *corev1.Event) any { return e.Type }),
		c("Reason", "string", "This should be a short, machine understandable string that gives the reason for this event being generated.", 0, func(e *corev1.Event) any { return e.Reason }),
		c("Object", "string", "Object this event is about.", 0, func(e *corev1.Event) any {
			return fmt.Sprintf("%s/%s", lower(e.InvolvedObject.Kind), e.InvolvedObject.Name)
		}),
		c("Subobject", "string", "Subobject of the involved object.", 1, func(e *corev1.Event) any { return e.InvolvedObject.FieldPath }),
		c("Source", "string", "These are the source of the event.", 1, func(e *corev1.Event) any { return e.Source.Component }),
		c("Message", "string", "A human-readable description of the status of this operation.", 0, func(e *corev1.Event) any { return e.Message }),
		c("First Seen", "string", "The time at which the event was first recorded.", 1, func(e *corev1.Event) any { return registry.Since(e.FirstTimestamp) }),
		c("Count", "string", "The number of times this event has occurred.", 1, func(e *corev1.Event) any { return int64(e.Count) }),
		c("Name", "string", "Name of the event.", 1, func(e *corev1.Event) any { return e.Name }),
	)
}

func lastSeen(e *corev1.Event) metav1.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case e.Series != nil:
		return metav1.Time{Time: e.Series.LastObservedTime.Time}
	case !e.EventTime.IsZero():
		return metav1.Time{Time: e.EventTime.Time}
	}
	return e.FirstTimestamp
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func eventStorage(ctx providers.Context) (map[string]rest.Storage, error) {
	st := strategy(ctx.Scheme, true)
	st.CreateOnUpdate = true
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList { return ValidateEvent(obj.(*corev1.Event)) }
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		e, o := obj.(*corev1.Event), old.(*corev1.Event)
		return append(validateMetaUpdate(&e.ObjectMeta, &o.ObjectMeta), ValidateEvent(e)...)
	}
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: corev1.Resource("events"), Singular: "event",
		NewFunc:  func() runtime.Object { return &corev1.Event{} },
		NewList:  func() runtime.Object { return &corev1.EventList{} },
		Strategy: st, ShortNames: []string{"ev"},
		Table:    EventTable(),
		AttrFunc: registry.AttrFunc(true, EventFields),
		TTL:      func(runtime.Object, uint64, bool) (uint64, error) { return EventTTL, nil },
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"events": store}, nil
}
