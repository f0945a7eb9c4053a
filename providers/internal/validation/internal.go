package validation

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Immutable is apimachinery's ValidateImmutableField with the new value
// shown as kube-apiserver shows it (AsInternal): for a field of a
// k8s.io/api struct type.
func Immutable(newVal, oldVal any, p *field.Path) field.ErrorList {
	if apiequality.Semantic.DeepEqual(oldVal, newVal) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, AsInternal(newVal), apivalidation.FieldImmutableErrorMsg)}
}

// Diff is the unified diff of old and new as kube-apiserver words it in a
// message (apimachinery's diff.Diff of its internal values).
func Diff(oldVal, newVal any) string { return diff.Diff(AsInternal(oldVal), AsInternal(newVal)) }

// AsInternal shows v, in a field.Invalid error's value, as kube-apiserver
// shows it: a value of its internal types, which carry no json tags, so
// that their JSON names every field by its Go name, null when unset
// ({"MinAvailable":1,"Selector":null,...}), where k8s.io/api's types give
// {"minAvailable":1}. Types of k8s.io/apimachinery (IntOrString,
// LabelSelector, Quantity, Time) are the same in both and keep their JSON.
// Only for types whose internal fields are their external ones, in order
// (checked against kube-apiserver for PodTemplateSpec, PersistentVolumeClaimSpec,
// PodDisruptionBudgetSpec and NonResourceAttributes by parity scenarios).
func AsInternal(v any) json.Marshaler { return internal{reflect.ValueOf(v)} }

type internal struct{ v reflect.Value }

func (i internal) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	err := writeInternal(&b, i.v)
	return b.Bytes(), err
}

func writeInternal(b *bytes.Buffer, v reflect.Value) error {
	if !v.IsValid() {
		b.WriteString("null")
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		return writeInternal(b, v.Elem())
	case reflect.Struct:
		if !strings.HasPrefix(v.Type().PkgPath(), "k8s.io/api/") {
			return writeJSON(b, v)
		}
		return writeFields(b, v)
	case reflect.Slice:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		b.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeInternal(b, v.Index(i)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	}
	return writeJSON(b, v)
}

// writeFields writes a struct of k8s.io/api as its internal type is
// written: every field by its Go name, an embedded one (ObjectMeta in a
// PodTemplateSpec) inlined, as encoding/json inlines an embedded struct
// without a json tag.
func writeFields(b *bytes.Buffer, v reflect.Value) error {
	b.WriteByte('{')
	first := true
	for i := range v.NumField() {
		var field bytes.Buffer
		if err := writeInternal(&field, v.Field(i)); err != nil {
			return err
		}
		data := field.Bytes()
		if v.Type().Field(i).Anonymous && len(data) >= 2 && data[0] == '{' {
			if data = data[1 : len(data)-1]; len(data) == 0 {
				continue
			}
		} else {
			name, _ := json.Marshal(v.Type().Field(i).Name)
			data = append(append(name, ':'), data...)
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.Write(data)
	}
	b.WriteByte('}')
	return nil
}

func writeJSON(b *bytes.Buffer, v reflect.Value) error {
	data, err := json.Marshal(v.Interface())
	b.Write(data)
	return err
}
