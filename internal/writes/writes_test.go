package writes_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/kubeembed/apiserver/internal/writes"
	"github.com/kubeembed/apiserver/storage"
	"github.com/kubeembed/apiserver/storage/memory"
)

var (
	configMaps = corev1.Resource("configmaps")
	secrets    = corev1.Resource("secrets")
)

func newStore(t *testing.T, b storage.Backend, gr schema.GroupResource) k8sstorage.Interface {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, corev1.AddToScheme(scheme))
	codec := serializer.NewCodecFactory(scheme).LegacyCodec(corev1.SchemeGroupVersion)
	s, err := b.Store(storage.ResourceConfig{
		GroupResource: gr, Codec: codec, Prefix: "/registry", ResourcePrefix: "/" + gr.Resource,
		NewFunc:     func() runtime.Object { return &corev1.ConfigMap{} },
		NewListFunc: func() runtime.Object { return &corev1.ConfigMapList{} },
	})
	require.NoError(t, err)
	return s
}

// Every write that succeeds is noted under its resource at the revision it
// made; a read, and a write that fails, are not.
func TestTrackNotesEachSuccessfulWrite(t *testing.T) {
	t.Parallel()
	backend := memory.NewBackend(memory.Options{})
	t.Cleanup(func() { _ = backend.Close() })
	var log writes.Log
	tracked := writes.Track(backend, &log)
	cms, other := newStore(t, tracked, configMaps), newStore(t, tracked, secrets)
	ctx := context.Background()

	created := &corev1.ConfigMap{}
	require.NoError(t, cms.Create(ctx, "/configmaps/ns/a", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}}, created, 0))
	assert.Equal(t, map[schema.GroupResource]uint64{configMaps: writes.Revision(created)}, log.Snapshot())

	err := cms.Create(ctx, "/configmaps/ns/a", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}}, &corev1.ConfigMap{}, 0)
	require.True(t, k8sstorage.IsExist(err), "a second create of the key fails: %v", err)
	require.NoError(t, cms.Get(ctx, "/configmaps/ns/a", k8sstorage.GetOptions{}, &corev1.ConfigMap{}))
	assert.Equal(t, writes.Revision(created), log.Latest(), "neither the failed create nor the get is a write")

	updated := &corev1.ConfigMap{}
	require.NoError(t, cms.GuaranteedUpdate(ctx, "/configmaps/ns/a", updated, false, nil,
		func(in runtime.Object, _ k8sstorage.ResponseMeta) (runtime.Object, *uint64, error) {
			cm := in.(*corev1.ConfigMap).DeepCopy()
			cm.Data = map[string]string{"k": "v"}
			return cm, nil, nil
		}, nil))
	assert.Greater(t, writes.Revision(updated), writes.Revision(created))

	failed := cms.GuaranteedUpdate(ctx, "/configmaps/ns/a", &corev1.ConfigMap{}, false, nil,
		func(runtime.Object, k8sstorage.ResponseMeta) (runtime.Object, *uint64, error) {
			return nil, nil, errors.New("refused")
		}, nil)
	require.Error(t, failed)

	secret := &corev1.ConfigMap{}
	require.NoError(t, other.Create(ctx, "/secrets/ns/s", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}}, secret, 0))
	deleted := &corev1.ConfigMap{}
	require.NoError(t, cms.Delete(ctx, "/configmaps/ns/a", deleted, nil, k8sstorage.ValidateAllObjectFunc, nil, k8sstorage.DeleteOptions{}))

	assert.Equal(t, map[schema.GroupResource]uint64{configMaps: writes.Revision(deleted), secrets: writes.Revision(secret)}, log.Snapshot(),
		"the deletion's revision is the config maps' last write")
	assert.Equal(t, writes.Revision(deleted), log.Latest())
}

func TestLogKeepsTheLatestRevisionPerResource(t *testing.T) {
	t.Parallel()
	var l writes.Log
	assert.Zero(t, l.Latest())
	l.Wrote(configMaps, objectAt("7"))
	l.Wrote(secrets, objectAt("9"))
	l.Wrote(configMaps, objectAt("5")) // a no-op update returns an older object
	l.Wrote(configMaps, objectAt(""))  // nothing to note
	assert.EqualValues(t, 9, l.Latest())
	assert.Equal(t, map[schema.GroupResource]uint64{configMaps: 7, secrets: 9}, l.Snapshot())

	snap := l.Snapshot()
	snap[configMaps] = 100
	assert.EqualValues(t, 7, l.Snapshot()[configMaps], "a snapshot is a copy")
}

func objectAt(rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
}
