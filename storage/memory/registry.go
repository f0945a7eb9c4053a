package memory

import (
	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/kubeembed/apiserver/storage"
)

var _ storage.Backend = (*Backend)(nil)

// Store implements storage.Backend: the resource's store on b, with the
// codec, transformer and keys of cfg, so that the generic registry,
// apiextensions (whose codec prunes, defaults and converts custom resources)
// and the aggregator all store through it unchanged.
//
// There is deliberately no watch cache (cacher) in front: the memory store
// serves lists and watches from memory already, and a fresh cacher answers
// 429 with Retry-After until it has synced, which client-go waits out
// silently. See BENCHMARKS.md for the numbers.
func (b *Backend) Store(cfg storage.ResourceConfig) (k8sstorage.Interface, error) {
	return b.NewStore(Config{
		Codec:          cfg.Codec,
		Transformer:    cfg.Transformer,
		Prefix:         cfg.Prefix,
		ResourcePrefix: cfg.ResourcePrefix,
		GroupResource:  cfg.GroupResource,
		NewFunc:        cfg.NewFunc,
		NewListFunc:    cfg.NewListFunc,
	})
}
