// Package eventstore declares the one store of events: core/v1 Events,
// which events.k8s.io/v1 serves too (kube-apiserver stores both as core
// events, under one key).
package eventstore

import (
	"cmp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/internal/printers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Kind is the events resource of gv, checked with validate: names are any
// path segment, PUT may create, objects live for an hour (kube-apiserver's
// --event-ttl default).
func Kind(gv schema.GroupVersion, validate func(*corev1.Event) field.ErrorList) registry.Kind[*corev1.Event] {
	return registry.Kind[*corev1.Event]{
		GroupVersion: gv, Resource: "events", Singular: "event", ShortNames: []string{"ev"}, Namespaced: true,
		NameValidation: registry.PathSegmentName, CreateOnUpdate: true,
		NewObj:   func() runtime.Object { return &corev1.Event{} },
		NewList:  func() runtime.Object { return &corev1.EventList{} },
		Validate: validate,
		TTL:      func(runtime.Object, uint64, bool) (uint64, error) { return ttl, nil },
		Fields:   selectableFields, FieldNames: fieldNames,
		Table: table(),
	}
}

// ttl is how long events live in storage: kube-apiserver's --event-ttl
// default.
const ttl = 3600

var fieldNames = []string{
	"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
	"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
	"reason", "reportingComponent", "source", "type",
}

// selectableFields are the selectable fields of an event.
func selectableFields(e *corev1.Event) fields.Set {
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

// ValidateCore checks what kube-apiserver checks of a core/v1 event.
func ValidateCore(e *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if e.InvolvedObject.Namespace != "" && e.InvolvedObject.Namespace != e.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("involvedObject", "namespace"), e.InvolvedObject.Namespace, "does not match event.namespace"))
	}
	if e.Type != "" && e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		errs = append(errs, field.NotSupported(field.NewPath("type"), e.Type, []string{corev1.EventTypeNormal, corev1.EventTypeWarning}))
	}
	return errs
}

// table prints events as kubectl get events does, NAME last.
func table() []registry.Column {
	c := func(name, typ, desc string, priority int32, v func(e *corev1.Event) any) registry.Column {
		return registry.ColumnOf(name, typ, desc, priority, v)
	}
	doc := corev1.Event{}.SwaggerDoc()
	return []registry.Column{
		c("Last Seen", "string", doc["lastTimestamp"], 0, func(e *corev1.Event) any { return lastSeen(e) }),
		c("Type", "string", doc["type"], 0, func(e *corev1.Event) any { return e.Type }),
		c("Reason", "string", doc["reason"], 0, func(e *corev1.Event) any { return e.Reason }),
		c("Object", "string", doc["involvedObject"], 0, func(e *corev1.Event) any {
			kind := strings.ToLower(e.InvolvedObject.Kind)
			if e.InvolvedObject.Name == "" {
				return kind
			}
			return kind + "/" + e.InvolvedObject.Name
		}),
		c("Subobject", "string", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"], 1, func(e *corev1.Event) any { return e.InvolvedObject.FieldPath }),
		c("Source", "string", doc["source"], 1, eventSource),
		c("Message", "string", doc["message"], 0, func(e *corev1.Event) any { return strings.TrimSpace(e.Message) }),
		c("First Seen", "string", doc["firstTimestamp"], 1, func(e *corev1.Event) any { return firstSeen(e) }),
		c("Count", "string", doc["count"], 1, func(e *corev1.Event) any {
			// A series counts itself; an event without a count happened once.
			switch {
			case e.Series != nil:
				return int64(e.Series.Count)
			case e.Count == 0:
				return int64(1)
			}
			return int64(e.Count)
		}),
		func() registry.Column { n := registry.NameColumn(); n.Priority = 1; return n }(),
	}
}

// eventSource is "component, host" (host left out when empty), where
// events.k8s.io events name their reporting controller and instance
// instead.
func eventSource(e *corev1.Event) any {
	component := cmp.Or(e.Source.Component, e.ReportingController)
	if instance := cmp.Or(e.Source.Host, e.ReportingInstance); instance != "" {
		return component + ", " + instance
	}
	return component
}

// firstSeen is the time since firstTimestamp, or since eventTime for an
// event that has none (as events.k8s.io events).
func firstSeen(e *corev1.Event) string {
	if e.FirstTimestamp.IsZero() {
		return printers.Since(metav1.Time{Time: e.EventTime.Time})
	}
	return printers.Since(e.FirstTimestamp)
}

// lastSeen is the time since the series' last observation if the event
// is a series, else since lastTimestamp, else the same as firstSeen.
func lastSeen(e *corev1.Event) string {
	switch {
	case e.Series != nil:
		return printers.Since(metav1.Time{Time: e.Series.LastObservedTime.Time})
	case !e.LastTimestamp.IsZero():
		return printers.Since(e.LastTimestamp)
	}
	return firstSeen(e)
}
