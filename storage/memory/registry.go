package memory

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// Decorator returns a generic.StorageDecorator that creates each resource's
// store on b, for generic.RESTOptions.Decorator. The store uses the codec,
// transformer and key prefix of the resource's storage config, so the
// generic registry, apiextensions (whose codec prunes, defaults and converts
// custom resources) and the aggregator all store through it unchanged.
//
// There is deliberately no watch cache (cacher) in front: the memory store
// serves lists and watches from memory already, and a fresh cacher answers
// 429 with Retry-After until it has synced, which client-go waits out
// silently. See BENCHMARKS.md for the numbers.
func (b *Backend) Decorator() generic.StorageDecorator {
	return func(config *storagebackend.ConfigForResource, resourcePrefix string,
		_ func(obj runtime.Object) (string, error), newFunc, newListFunc func() runtime.Object,
		_ storage.AttrFunc, _ storage.IndexerFuncs, _ *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
		s, err := b.NewStore(Config{
			Codec:          config.Codec,
			Transformer:    config.Transformer,
			Prefix:         config.Prefix,
			ResourcePrefix: resourcePrefix,
			GroupResource:  config.GroupResource,
			NewFunc:        newFunc,
			NewListFunc:    newListFunc,
		})
		if err != nil {
			return nil, nil, err
		}
		// Stores own nothing; the Backend's Close stops their watches.
		return s, func() {}, nil
	}
}
