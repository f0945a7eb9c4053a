package controlplane

// The storage seam as the tiers see it: each resource's generic.RESTOptions
// (codec, key prefix) with its store from the server's storage.Backend.

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/recognizer"
	"k8s.io/apiserver/pkg/registry/generic"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/kubeembed/apiserver/storage"
)

// etcdPrefix is the key prefix of every stored object, kube-apiserver's
// --etcd-prefix default.
const etcdPrefix = "/registry"

// restOptionsGetter gives resources storage from a storage factory (codec,
// key prefix) on the server's storage backend.
type restOptionsGetter struct {
	factory serverstorage.StorageFactory
	backend storage.Backend
	// untyped clears apiVersion and kind of the objects storage decodes.
	untyped bool
}

func (g restOptionsGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	cfg, err := g.factory.NewConfig(resource, example)
	if err != nil {
		return generic.RESTOptions{}, fmt.Errorf("storage for %v: %w", resource, err)
	}
	if g.untyped {
		cfg.Codec = untypedCodec{cfg.Codec}
	}
	return generic.RESTOptions{
		StorageConfig:           cfg,
		Decorator:               storage.Decorator(g.backend),
		EnableGarbageCollection: true,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          g.factory.ResourcePrefix(resource),
	}, nil
}

// untypedCodec makes the built-in objects read from storage look like
// kube-apiserver's. It decodes storage into internal types, which have no
// apiVersion and kind, so that the items of a list it serves carry none
// (only the list itself is typed when encoded). The providers use the
// k8s.io/api types as their internal version too, which the codec leaves
// typed. Custom resources (unstructured) keep theirs, as on kube-apiserver.
type untypedCodec struct{ runtime.Codec }

func (c untypedCodec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := c.Codec.Decode(data, defaults, into)
	if obj != nil {
		if _, ok := obj.(runtime.Unstructured); !ok {
			obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		}
	}
	return obj, gvk, err
}

// simpleGetter stores every resource with one codec, under group/resource,
// as kube-apiserver configures the aggregator and apiextensions tiers.
func simpleGetter(b storage.Backend, codec runtime.Codec, encode runtime.GroupVersioner) restOptionsGetter {
	return restOptionsGetter{
		factory: &genericoptions.SimpleStorageFactory{StorageConfig: storagebackend.Config{
			Prefix: etcdPrefix, Codec: codec, EncodeVersioner: encode,
		}},
		backend: b,
	}
}

// customResourceCodec stores custom resources as JSON; apiextensions puts
// its own codec (pruning, defaulting, conversion) in front of this one.
func customResourceCodec() runtime.Codec {
	return runtime.NewCodec(unstructured.UnstructuredJSONScheme, recognizer.NewDecoder(unstructured.UnstructuredJSONScheme))
}
