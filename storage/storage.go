// Package storage is the seam between a kubeembed server and where its
// objects live. A Backend plays the role of one etcd cluster: the server asks
// it for one store per resource (pods, deployments, each CRD's custom
// resources...), each a k8s.io/apiserver storage.Interface, the interface the
// generic registry, apiextensions and the aggregator already store through.
//
// storage/memory is the default backend. Another backend (etcd, say) is a
// sibling package implementing Backend; nothing above this seam knows which
// backend it talks to.
package storage

import (
	"context"
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	k8sstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/client-go/tools/cache"
)

// Backend creates the store of each resource a server serves. Its stores
// share one revision counter, as an etcd cluster's keys do: resourceVersions
// are revisions, read and written by storage.APIObjectVersioner.
//
// A Backend must be safe for concurrent use; the server calls Store while it
// is being built and never after Start.
type Backend interface {
	// Store returns the storage of one resource. Objects are stored as the
	// bytes Codec and Transformer produce, under
	// Prefix + ResourcePrefix + "/" [+ namespace + "/"] + name.
	Store(ResourceConfig) (k8sstorage.Interface, error)
	// Check reports whether the backend serves requests: the server's etcd
	// health check (/healthz/etcd, /livez/etcd, /readyz/etcd), whichever the
	// backend, and storage-readiness.
	Check(ctx context.Context) error
	// Close releases the backend and ends the watches of its stores. The
	// server closes a backend only if it created it.
	Close() error
}

// ResourceConfig is what a Backend is told about one resource.
type ResourceConfig struct {
	// GroupResource names the resource ("deployments.apps"), in errors.
	GroupResource schema.GroupResource
	// Codec encodes objects into stored bytes and decodes them back.
	Codec runtime.Codec
	// Transformer transforms stored bytes (encryption at rest); nil for
	// none.
	Transformer value.Transformer
	// Prefix is the server's key prefix, kube-apiserver's --etcd-prefix
	// ("/registry").
	Prefix string
	// ResourcePrefix is the resource's keys' prefix below Prefix, such as
	// "/pods" or "/apps/deployments".
	ResourcePrefix string
	// NewFunc and NewListFunc return an empty object and list of the
	// resource, for decoding and watch bookmarks.
	NewFunc, NewListFunc func() runtime.Object
	// AttrFunc returns an object's labels and selectable fields, for a
	// backend that filters or caches (a watch cache) by them.
	AttrFunc k8sstorage.AttrFunc
	// KeyFunc, IndexerFuncs and Indexers are the registry's key of an
	// object and its indexes, for a backend that caches (a watch cache).
	KeyFunc      func(runtime.Object) (string, error)
	IndexerFuncs k8sstorage.IndexerFuncs
	Indexers     *cache.Indexers
}

// Counter is implemented by backends that count the live keys under a
// prefix cheaply: the server's apiserver_resource_objects metric.
type Counter interface {
	Count(ctx context.Context, keyPrefix string) (int64, error)
}

// Etcd is implemented by backends that store in an etcd cluster
// (storage/etcd): kube-apiserver reports its storage's health among the
// cluster's components (componentstatuses "etcd-0"), and a server does the
// same for such a backend only.
type Etcd interface {
	Client() *clientv3.Client
}

// Snapshotter is implemented by backends that can take a snapshot of every
// key and put it back (storage/memory): Server.Snapshot and Server.Restore.
type Snapshotter interface {
	Snapshot() Snapshot
	// Restore makes the backend's keys those of a snapshot it took, at new
	// revisions; watches that miss changes end with 410 Gone.
	Restore(Snapshot) error
}

// RestoreReporter is implemented by a Snapshotter whose Restore can tell
// what it changed (storage/memory): the keys it wrote or deleted, each
// with the revision of its write; with keepHistory, watches see those
// changes as events instead of ending. Server.Reset restores so, and then waits
// for the informers to see the changes.
type RestoreReporter interface {
	RestoreReport(snap Snapshot, keepHistory bool) (changed map[string]int64, err error)
}

// Snapshot is the state of a backend's keys at a revision.
type Snapshot interface {
	// Revision is the revision the snapshot was taken at.
	Revision() int64
}

// ErrForeignSnapshot is returned by Restore for a snapshot another kind of
// backend took.
var ErrForeignSnapshot = errors.New("storage: the snapshot is of another kind of backend")

// Decorator adapts b to k8s.io/apiserver's generic registry: a
// generic.RESTOptions whose Decorator it is stores its resource in b. The
// server stores every tier so; an API server built on k8s.io/apiserver may
// too (examples/aggregated-apiserver). b owns the stores: its Close
// releases them.
func Decorator(b Backend) generic.StorageDecorator {
	return func(config *storagebackend.ConfigForResource, resourcePrefix string,
		keyFunc func(obj runtime.Object) (string, error), newFunc, newListFunc func() runtime.Object,
		attrs k8sstorage.AttrFunc, triggers k8sstorage.IndexerFuncs, indexers *cache.Indexers) (k8sstorage.Interface, factory.DestroyFunc, error) {
		s, err := b.Store(ResourceConfig{
			GroupResource: config.GroupResource,
			Codec:         config.Codec, Transformer: config.Transformer,
			Prefix: config.Prefix, ResourcePrefix: resourcePrefix,
			NewFunc: newFunc, NewListFunc: newListFunc, AttrFunc: attrs,
			KeyFunc: keyFunc, IndexerFuncs: triggers, Indexers: indexers,
		})
		if err != nil {
			return nil, nil, err
		}
		return s, func() {}, nil
	}
}
