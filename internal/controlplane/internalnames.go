package controlplane

import (
	"errors"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// internalNames is the core tier's NegotiatedSerializer: its codecs, with
// the decode errors that name a Go type naming it as kube-apiserver does.
// kube-apiserver decodes a request body into its internal version
// (k8s.io/kubernetes/pkg/apis/core.ConfigMap), so a body of another kind
// fails with "converting (v1.Secret) to (core.ConfigMap): unknown
// conversion"; the core tier decodes into the k8s.io/api types themselves,
// and the same error would name v1.ConfigMap.
type internalNames struct{ runtime.NegotiatedSerializer }

func (n internalNames) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return internalNamesDecoder{n.NegotiatedSerializer.DecoderToVersion(d, gv)}
}

type internalNamesDecoder struct{ runtime.Decoder }

func (d internalNamesDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := d.Decoder.Decode(data, defaults, into)
	if err == nil || into == nil || !strings.HasSuffix(err.Error(), ": unknown conversion") {
		return obj, gvk, err
	}
	t := reflect.TypeOf(into)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	internal, ok := internalPackage(t.PkgPath())
	if !ok {
		return obj, gvk, err
	}
	return obj, gvk, errors.New(strings.Replace(err.Error(), "to ("+t.String()+")", "to ("+internal+"."+t.Name()+")", 1))
}

// internalPackage names the package of kube-apiserver's internal types of
// the k8s.io/api package path: k8s.io/api/apps/v1 is apps; events.k8s.io's
// internal type is core.Event.
func internalPackage(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "k8s.io/api/")
	if !ok {
		return "", false
	}
	group, _, _ := strings.Cut(rest, "/")
	if group == "events" {
		group = "core"
	}
	return group, true
}
