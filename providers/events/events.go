// Package events serves events.k8s.io/v1 events. They are the same objects as
// core/v1 events, stored once under the same keys: the group's hub type is
// corev1.Event, as kube-apiserver's is its internal core event, and
// events.k8s.io/v1 converts to and from it.
package events

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/internal/eventstore"
	"github.com/kubeembed/apiserver/providers/registry"
)

// install registers events.k8s.io/v1 with core/v1 Events as its internal
// version, and the conversions between them.
func install(scheme *runtime.Scheme) error {
	if err := eventsv1.AddToScheme(scheme); err != nil {
		return err
	}
	internal := eventsv1.SchemeGroupVersion.WithKind("").GroupVersion()
	internal.Version = runtime.APIVersionInternal
	scheme.AddKnownTypeWithName(internal.WithKind("Event"), &corev1.Event{})
	scheme.AddKnownTypeWithName(internal.WithKind("EventList"), &corev1.EventList{})
	for _, err := range []error{
		scheme.AddConversionFunc((*eventsv1.Event)(nil), (*corev1.Event)(nil), func(a, b any, _ conversion.Scope) error {
			toCore(a.(*eventsv1.Event), b.(*corev1.Event))
			return nil
		}),
		scheme.AddConversionFunc((*corev1.Event)(nil), (*eventsv1.Event)(nil), func(a, b any, _ conversion.Scope) error {
			fromCore(a.(*corev1.Event), b.(*eventsv1.Event))
			return nil
		}),
		scheme.AddConversionFunc((*eventsv1.EventList)(nil), (*corev1.EventList)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*eventsv1.EventList), b.(*corev1.EventList)
			out.ListMeta = in.ListMeta
			out.Items = make([]corev1.Event, len(in.Items))
			for i := range in.Items {
				toCore(&in.Items[i], &out.Items[i])
			}
			return nil
		}),
		scheme.AddConversionFunc((*corev1.EventList)(nil), (*eventsv1.EventList)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*corev1.EventList), b.(*eventsv1.EventList)
			out.ListMeta = in.ListMeta
			out.Items = make([]eventsv1.Event, len(in.Items))
			for i := range in.Items {
				fromCore(&in.Items[i], &out.Items[i])
			}
			return nil
		}),
	} {
		if err != nil {
			return err
		}
	}
	return scheme.SetVersionPriority(eventsv1.SchemeGroupVersion)
}

// convertFieldLabel maps events.k8s.io/v1 field names to the stored
// object's, as kube-apiserver does.
func convertFieldLabel(label, value string) (string, string, error) {
	switch {
	case label == "metadata.name", label == "metadata.namespace", label == "reason", label == "type":
		return label, value, nil
	case strings.HasPrefix(label, "regarding."):
		return "involvedObject." + strings.TrimPrefix(label, "regarding."), value, nil
	case label == "reportingController":
		return "reportingComponent", value, nil
	case label == "deprecatedSource":
		return "source", value, nil
	}
	return "", "", fmt.Errorf("field label not supported: %s", label)
}

func toCore(in *eventsv1.Event, out *corev1.Event) {
	*out = corev1.Event{
		TypeMeta:            out.TypeMeta,
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Related:             in.Related,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
		Action:              in.Action,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
}

func fromCore(in *corev1.Event, out *eventsv1.Event) {
	*out = eventsv1.Event{
		TypeMeta:                 out.TypeMeta,
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
}

// noteLengthLimit is the longest note an events.k8s.io event may carry.
const noteLengthLimit = 1024

// validateV1 checks what kube-apiserver requires of an event created through
// events.k8s.io/v1, on the stored (core) form: field paths are the v1 names.
func validateV1(e *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if e.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if e.Series != nil {
		if e.Series.Count < 2 {
			errs = append(errs, field.Invalid(field.NewPath("series", "count"), e.Series.Count, "should be at least 2"))
		}
		if e.Series.LastObservedTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("series", "lastObservedTime"), ""))
		}
	}
	if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		errs = append(errs, field.NotSupported(field.NewPath("type"), e.Type, []string{corev1.EventTypeNormal, corev1.EventTypeWarning}))
	}
	for _, f := range []struct{ name, value string }{
		{"reportingController", e.ReportingController}, {"reportingInstance", e.ReportingInstance},
		{"action", e.Action}, {"reason", e.Reason},
	} {
		if f.value == "" {
			errs = append(errs, field.Required(field.NewPath(f.name), ""))
		}
	}
	if len(e.Message) > noteLengthLimit {
		errs = append(errs, field.TooLong(field.NewPath("note"), "", noteLengthLimit))
	}
	if e.InvolvedObject.Namespace != "" && e.InvolvedObject.Namespace != e.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("regarding", "namespace"), e.InvolvedObject.Namespace, "does not match event.namespace"))
	}
	return errs
}

// Provider serves events.k8s.io. It needs the core provider, which owns the
// events' storage layout.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: eventsv1.SchemeGroupVersion,
	// The internal version is core/v1's Event: see install.
	Register: install,
	Served:   []registry.Served{eventsKind()},
}

// eventsKind is the one store of events (providers/internal/eventstore),
// served with events.k8s.io's names, field selectors and validation.
func eventsKind() registry.Kind[*corev1.Event] {
	k := eventstore.Kind(eventsv1.SchemeGroupVersion, validateV1)
	k.NameValidation = apivalidation.NameIsDNSSubdomain
	k.FieldLabel = convertFieldLabel
	return k
}
