package validation

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

// AsInternal shows v, in a field.Invalid error's value, as kube-apiserver
// shows it: a value of its internal types, which carry no json tags, so
// that their JSON names every field by its Go name, null when unset
// ({"MinAvailable":1,"Selector":null,...}), where k8s.io/api's types give
// {"minAvailable":1}. Types of k8s.io/apimachinery (IntOrString,
// LabelSelector, Quantity, Time) are the same in both and keep their JSON.
// Only for types whose internal fields are their external ones, in order.
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
		b.WriteByte('{')
		for i := range v.NumField() {
			if i > 0 {
				b.WriteByte(',')
			}
			name, _ := json.Marshal(v.Type().Field(i).Name)
			b.Write(name)
			b.WriteByte(':')
			if err := writeInternal(b, v.Field(i)); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
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

func writeJSON(b *bytes.Buffer, v reflect.Value) error {
	data, err := json.Marshal(v.Interface())
	b.Write(data)
	return err
}
