package writes

import (
	"context"
	"path"
	"strings"

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
	t.log.keysOf(cfg)
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

// keysOf notes where resource cfg keeps its keys, for Restored.
func (l *Log) keysOf(cfg storage.ResourceConfig) {
	prefix := path.Join("/", cfg.Prefix, cfg.ResourcePrefix) + "/"
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.prefixes == nil {
		l.prefixes = map[string][]schema.GroupResource{}
	}
	l.prefixes[prefix] = append(l.prefixes[prefix], cfg.GroupResource)
}

// Restored records a restore of the backend (storage.RestoreReporter):
// each changed key was written or deleted at its revision, as a write to
// its resource.
func (l *Log) Restored(changed map[string]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, rev := range changed {
		for prefix, grs := range l.prefixes {
			if !strings.HasPrefix(key, prefix) {
				continue
			}
			for _, gr := range grs {
				if l.last == nil {
					l.last = map[schema.GroupResource]uint64{}
				}
				l.last[gr] = max(l.last[gr], uint64(rev))
			}
		}
		l.latest = max(l.latest, uint64(rev))
	}
}
