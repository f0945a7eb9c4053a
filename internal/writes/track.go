package writes

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/kubeembed/apiserver/storage"
)

// Track returns b with every store it makes noting its writes in log.
func Track(b storage.Backend, log *Log) storage.Backend {
	return tracked{Backend: b, log: log}
}

type tracked struct {
	storage.Backend
	log *Log
}

// Store implements storage.Backend.
func (t tracked) Store(cfg storage.ResourceConfig) (k8sstorage.Interface, error) {
	st, err := t.Backend.Store(cfg)
	if err != nil {
		return nil, err
	}
	return store{Interface: st, resource: cfg.GroupResource, log: t.log}, nil
}

// store notes the revision of each write that succeeds.
type store struct {
	k8sstorage.Interface
	resource schema.GroupResource
	log      *Log
}

func (s store) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	err := s.Interface.Create(ctx, key, obj, out, ttl)
	if err == nil {
		s.log.Wrote(s.resource, out)
	}
	return err
}

func (s store) Delete(ctx context.Context, key string, out runtime.Object, pre *k8sstorage.Preconditions,
	validate k8sstorage.ValidateObjectFunc, cached runtime.Object, opts k8sstorage.DeleteOptions) error {
	err := s.Interface.Delete(ctx, key, out, pre, validate, cached, opts)
	if err == nil {
		s.log.Wrote(s.resource, out)
	}
	return err
}

func (s store) GuaranteedUpdate(ctx context.Context, key string, dest runtime.Object, ignoreNotFound bool,
	pre *k8sstorage.Preconditions, tryUpdate k8sstorage.UpdateFunc, cached runtime.Object) error {
	err := s.Interface.GuaranteedUpdate(ctx, key, dest, ignoreNotFound, pre, tryUpdate, cached)
	if err == nil {
		s.log.Wrote(s.resource, dest)
	}
	return err
}
