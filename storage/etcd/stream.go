package etcd

import (
	"context"

	"google.golang.org/grpc/metadata"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
)

// ownStream puts a watch cache's etcd watch and its progress requests on a
// gRPC watch stream of their own (the etcd client keys its streams by the
// context's outgoing metadata).
//
// A watch cache serves a consistent read once etcd has told it, through a
// progress notification, that it has seen every revision up to the read's.
// etcd answers a progress request on a stream only when every watcher of
// that stream has caught up and none starts after the current revision
// (watchableStore.progressIfSync); a request it cannot answer is dropped.
// A watch cache watches from the revision after its list, a future one
// until etcd's next write. On one shared stream, as upstream's caches are
// (SeparateCacheWatchRPC is off and locked), the cache that listed last
// kept every other cache of the server from learning of writes made before
// that list, until something wrote to etcd: a server starting on an idle
// etcd waited for ever for informers whose caches were behind (CI, with
// the watch cache: Start's "informers not synced" when the few servers of
// a test process were all starting). kube-apiserver never waits long there
// because it renews leases every few seconds; a test's etcd can be idle.
//
// On a stream of its own, a cache's watch is in the future only while etcd
// has written nothing since the cache's list, when the cache is already as
// fresh as any read can ask.
type ownStream struct {
	storage.Interface
	key string
}

func (s ownStream) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	return s.Interface.Watch(s.context(ctx), key, opts)
}

func (s ownStream) RequestWatchProgress(ctx context.Context) error {
	return s.Interface.RequestWatchProgress(s.context(ctx))
}

func (s ownStream) context(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "kubeembed-watch-cache", s.key)
}
