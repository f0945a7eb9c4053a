package etcd

// This file runs the upstream storage conformance suite
// (k8s.io/apiserver/pkg/storage/testing) against stores of the etcd Backend,
// with the Run* list storage/memory runs, each test on an etcd of its own
// (k8s.io/apiserver's testserver: embedded, in process), set up as etcd3's
// store_test.go sets up its store: the "example" group, a prefix
// transformer, "/pods" as resource prefix.
//
// Run* functions not run here, and why (the same as storage/memory):
//   - RunTestGetListWithErrorAggregation, RunTestDeleteWithConflictAndMissingExpectedTransformOrDecodeError,
//     RunTestDeleteExpectedTransformOrDecodeError: they need etcd3's
//     unexported corruptObjectError to compare errors with.
//   - RunTestOptionalWatchBookmarksWithCorrectResourceVersion: for the watch
//     cache (the cacher's own tests run it).
//   - RunBenchmark*: benchmarks.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"k8s.io/apimachinery/pkg/api/apitesting"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/apiserver/pkg/storage/etcd3/testserver"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	"k8s.io/apiserver/pkg/storage/value"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/kubeembed/apiserver/storage/internal/conformance"

	"github.com/kubeembed/apiserver/internal/globals"
	kestorage "github.com/kubeembed/apiserver/storage"
)

const testValuePrefix = "test!"

// The test etcd's client logs through klog before New would set it (a data
// race under -race): set it first.
func init() { globals.InitKlog() }

// testStore is a store of a Backend, with what the suite's validations
// look at: the transformer it reads through and the client's read counts.
type testStore struct {
	storage.Interface
	b           *Backend
	transformer *swappable
	kv          *storagetesting.KVRecorder
	codec       runtime.Codec
}

// swappable is a value.Transformer the suite may replace under a running
// store (UpdatePrefixTransformer, UpdateTransformer).
type swappable struct {
	p atomic.Pointer[value.Transformer]
}

func (s *swappable) get() value.Transformer { return *s.p.Load() }
func (s *swappable) TransformFromStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, bool, error) {
	return s.get().TransformFromStorage(ctx, data, dataCtx)
}
func (s *swappable) TransformToStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, error) {
	return s.get().TransformToStorage(ctx, data, dataCtx)
}

func (s testStore) UpdatePrefixTransformer(modify storagetesting.PrefixTransformerModifier) func() {
	orig := s.transformer.p.Load()
	copied := *((*orig).(*storagetesting.PrefixTransformer))
	next := modify(&copied)
	s.transformer.p.Store(&next)
	return func() { s.transformer.p.Store(orig) }
}

type storeWithTransformerOverride struct{ testStore }

func (s storeWithTransformerOverride) UpdateTransformer(modify storagetesting.TransformerModifier) func() {
	orig := s.transformer.p.Load()
	next := modify(*orig)
	s.transformer.p.Store(&next)
	return func() { s.transformer.p.Store(orig) }
}

func testScheme() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	utilruntime.Must(example.AddToScheme(scheme))
	utilruntime.Must(examplev1.AddToScheme(scheme))
	return serializer.NewCodecFactory(scheme)
}

// testSetup starts an etcd (with cfg, or the test server's default) and
// returns a store of a Backend on it under prefix "/", as etcd3's tests.
func testSetup(t testing.TB, cfg *embed.Config) (context.Context, testStore) {
	t.Helper()
	client := testserver.RunEtcd(t, cfg)
	b, err := New(t.Context(), Options{Servers: client.Endpoints(), Prefix: "/", CompactionInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	lists := storagetesting.NewKubernetesRecorder(b.client.Kubernetes)
	kv := storagetesting.NewKVRecorder(b.client.KV, lists)
	b.client.KV, b.client.Kubernetes = kv, lists
	codec := apitesting.TestCodec(testScheme(), examplev1.SchemeGroupVersion)
	tr := &swappable{}
	var prefixed value.Transformer = storagetesting.NewPrefixTransformer([]byte(testValuePrefix), false)
	tr.p.Store(&prefixed)
	s, err := b.Store(kestorage.ResourceConfig{
		Codec: codec, Transformer: tr, Prefix: "/registry", ResourcePrefix: "/pods/",
		GroupResource: schema.GroupResource{Resource: "pods"},
		NewFunc:       func() runtime.Object { return &example.Pod{} },
		NewListFunc:   func() runtime.Object { return &example.PodList{} },
	})
	require.NoError(t, err)
	return context.Background(), testStore{Interface: s, b: b, transformer: tr, kv: kv, codec: codec}
}

// checkStorageInvariants checks what is stored under key: transformed bytes
// of an object without resourceVersion.
func checkStorageInvariants(s testStore) storagetesting.KeyValidation {
	return func(ctx context.Context, t *testing.T, key string) {
		resp, err := s.b.client.KV.Get(ctx, s.b.root+key)
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1, "expecting non empty result on key %s", key)
		obj, err := runtime.Decode(s.codec, resp.Kvs[0].Value[len(testValuePrefix):])
		require.NoError(t, err)
		if obj.(*example.Pod).ResourceVersion != "" {
			t.Errorf("stored object should have empty resource version")
		}
	}
}

// maxLimit is etcd3's largest page when it grows pages.
const maxLimit = 10000

// checkStorageCallsInvariants checks that lists decode only what they must
// and read etcd in doubling pages.
func checkStorageCallsInvariants(s testStore) storagetesting.CallsValidation {
	transformer := s.transformer.get().(*storagetesting.PrefixTransformer)
	return func(t *testing.T, pageSize, estimatedProcessedObjects uint64) {
		if reads := transformer.GetReadsAndReset(); reads != estimatedProcessedObjects {
			t.Errorf("unexpected reads: %d, expected: %d", reads, estimatedProcessedObjects)
		}
		estimatedGetCalls := conformance.ExpectedRangeReads(pageSize, estimatedProcessedObjects, maxLimit)
		if reads := s.kv.GetReadsAndReset() + s.kv.GetStreamReadsAndReset(); reads != estimatedGetCalls {
			t.Fatalf("unexpected reads: %d, want: %d", reads, estimatedGetCalls)
		}
	}
}

// compactStorage compacts as kube-apiserver's compactor does.
func compactStorage(s testStore) storagetesting.Compaction {
	return func(ctx context.Context, t *testing.T, resourceVersion string) {
		rv, err := storage.APIObjectVersioner{}.ParseResourceVersion(resourceVersion)
		require.NoError(t, err)
		var current int64
		current, _, _, err = etcd3.Compact(ctx, s.b.client.Client, current, int64(rv))
		if err != nil {
			_, _, _, err = etcd3.Compact(ctx, s.b.client.Client, current, int64(rv))
		}
		require.NoError(t, err)
		// The store learns the compaction from the compactor's watch.
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true,
			func(context.Context) (bool, error) { return s.CompactRevision() >= int64(rv), nil }))
	}
}

// increaseRV writes a key outside the store's prefix.
func increaseRV(s testStore) storagetesting.IncreaseRVFunc {
	return func(ctx context.Context, t *testing.T) int64 {
		resp, err := s.b.client.KV.Put(ctx, "increaseRV", "ok")
		require.NoError(t, err)
		return resp.Header.Revision
	}
}

// keys lists the store's keys, for size estimation.
func keys(s testStore) storage.KeysFunc {
	return func(ctx context.Context) ([]string, error) {
		resp, err := s.b.client.KV.Get(ctx, s.b.root+"/pods/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return nil, err
		}
		out := make([]string, len(resp.Kvs))
		for i, kv := range resp.Kvs {
			out[i] = string(kv.Key)
		}
		return out, nil
	}
}

func TestCreate(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestCreate(ctx, t, s, checkStorageInvariants(s))
}

func TestCreateWithTTL(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestCreateWithTTL(ctx, t, s)
}

func TestCreateWithKeyExist(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestCreateWithKeyExist(ctx, t, s)
}

func TestGet(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestGet(ctx, t, s)
}

func TestUnconditionalDelete(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestUnconditionalDelete(ctx, t, s)
}

func TestConditionalDelete(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestConditionalDelete(ctx, t, s)
}

func TestDeleteWithSuggestion(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestDeleteWithSuggestion(ctx, t, s)
}

func TestDeleteWithSuggestionAndConflict(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestDeleteWithSuggestionAndConflict(ctx, t, s)
}

func TestDeleteWithSuggestionOfDeletedObject(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestDeleteWithSuggestionOfDeletedObject(ctx, t, s)
}

func TestValidateDeletionWithSuggestion(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestValidateDeletionWithSuggestion(ctx, t, s)
}

func TestValidateDeletionWithOnlySuggestionValid(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestValidateDeletionWithOnlySuggestionValid(ctx, t, s)
}

func TestDeleteWithConflict(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestDeleteWithConflict(ctx, t, s)
}

func TestDeleteWithSuggestionAndMissingExpectedTransformOrDecodeError(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.AllowUnsafeMalformedObjectDeletion, true)
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestDeleteWithSuggestionAndMissingExpectedTransformOrDecodeError(ctx, t, s)
}

func TestPreconditionalDeleteWithSuggestion(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestPreconditionalDeleteWithSuggestion(ctx, t, s)
}

func TestPreconditionalDeleteWithOnlySuggestionPass(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestPreconditionalDeleteWithOnlySuggestionPass(ctx, t, s)
}

func TestListPaging(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestListPaging(ctx, t, s)
}

func TestGetListNonRecursive(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestGetListNonRecursive(ctx, t, increaseRV(s), s)
}

func TestGetListRecursivePrefix(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestGetListRecursivePrefix(ctx, t, s)
}

func TestKeySchema(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestKeySchema(ctx, t, s)
}

func TestGetListWithoutErrorAggregation(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.AllowUnsafeMalformedObjectDeletion, false)
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestGetListWithoutErrorAggregation(ctx, t, storeWithTransformerOverride{s}, errors.New("bits flipped"))
}

func TestGuaranteedUpdate(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestGuaranteedUpdate(ctx, t, s, checkStorageInvariants(s))
}

func TestGuaranteedUpdateWithTTL(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestGuaranteedUpdateWithTTL(ctx, t, s)
}

func TestGuaranteedUpdateChecksStoredData(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestGuaranteedUpdateChecksStoredData(ctx, t, s)
}

func TestGuaranteedUpdateWithConflict(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestGuaranteedUpdateWithConflict(ctx, t, s)
}

func TestGuaranteedUpdateWithSuggestionAndConflict(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestGuaranteedUpdateWithSuggestionAndConflict(ctx, t, s)
}

// The suite expects a store without the corrupt-object wrappers that
// kube-apiserver (and Store) add while AllowUnsafeMalformedObjectDeletion is
// on (Beta in 1.37): etcd3's own test builds its store without them.
func TestTransformationFailure(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.AllowUnsafeMalformedObjectDeletion, false)
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestTransformationFailure(ctx, t, s)
}

func TestList(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestList(ctx, t, s, compactStorage(s), false, nil)
}

func TestConsistentList(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestConsistentList(ctx, t, s, increaseRV(s), false, true, false)
}

func TestCompactRevision(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestCompactRevision(ctx, t, s, increaseRV(s), compactStorage(s))
}

func TestListContinuation(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestListContinuation(ctx, t, s, checkStorageCallsInvariants(s))
}

// As etcd3's own test: with ListFromCacheSnapshot the compactor reads its
// key once more, which the read count would see.
func TestListPaginationRareObject(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.ListFromCacheSnapshot, false)
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestListPaginationRareObject(ctx, t, s, checkStorageCallsInvariants(s))
}

func TestListContinuationWithFilter(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestListContinuationWithFilter(ctx, t, s, checkStorageCallsInvariants(s))
}

func TestNamespaceScopedList(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestNamespaceScopedList(ctx, t, s)
}

func TestListInconsistentContinuation(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestListInconsistentContinuation(ctx, t, s, compactStorage(s))
}

func TestListResourceVersionMatch(t *testing.T) {
	ctx, s := testSetup(t, nil)
	storagetesting.RunTestListResourceVersionMatch(ctx, t, s)
}

func TestStats(t *testing.T) {
	for _, sized := range []bool{true, false} {
		t.Run(fmt.Sprintf("SizeBasedListCostEstimate=%v", sized), func(t *testing.T) {
			ctx, s := testSetup(t, nil)
			if sized {
				require.NoError(t, s.EnableResourceSizeEstimation(keys(s)))
			}
			storagetesting.RunTestStats(ctx, t, s, s.codec, s.transformer, sized)
		})
	}
}

func TestWatch(t *testing.T) {
	run := func(name string, f func(t *testing.T, ctx context.Context, s testStore)) {
		t.Run(name, func(t *testing.T) {
			ctx, s := testSetup(t, nil)
			f(t, ctx, s)
		})
	}
	run("Watch", func(t *testing.T, ctx context.Context, s testStore) { storagetesting.RunTestWatch(ctx, t, s) })
	run("ClusterScopedWatch", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunTestClusterScopedWatch(ctx, t, s)
	})
	run("NamespaceScopedWatch", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunTestNamespaceScopedWatch(ctx, t, s)
	})
	run("DeleteTriggerWatch", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunTestDeleteTriggerWatch(ctx, t, s)
	})
	run("WatchFromZero", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunTestWatchFromZero(ctx, t, s, compactStorage(s))
	})
	run("WatchFromNonZero", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunTestWatchFromNonZero(ctx, t, s)
	})
	run("DelayedWatchDelivery", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunTestDelayedWatchDelivery(ctx, t, s)
	})
	run("WatchError", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunTestWatchError(ctx, t, s)
	})
	run("WatchContextCancel", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunTestWatchContextCancel(ctx, t, s)
	})
	run("WatcherTimeout", func(t *testing.T, ctx context.Context, s testStore) { storagetesting.RunTestWatcherTimeout(ctx, t, s) })
	run("WatchDeleteEventObjectHaveLatestRV", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunTestWatchDeleteEventObjectHaveLatestRV(ctx, t, s)
	})
	run("WatchInitializationSignal", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunTestWatchInitializationSignal(ctx, t, s)
	})
	t.Run("ProgressNotify", func(t *testing.T) {
		cfg := testserver.NewTestConfig(t)
		cfg.WatchProgressNotifyInterval = time.Second
		ctx, s := testSetup(t, cfg)
		storagetesting.RunOptionalTestProgressNotify(ctx, t, s, increaseRV(s))
	})
	t.Run("WatchWithUnsafeDelete", func(t *testing.T) {
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.AllowUnsafeMalformedObjectDeletion, true)
		ctx, s := testSetup(t, nil)
		storagetesting.RunTestWatchWithUnsafeDelete(ctx, t, storeWithTransformerOverride{s}, errors.New("bits flipped"))
	})
	t.Run("WatchDispatchBookmarkEvents", func(t *testing.T) {
		cfg := testserver.NewTestConfig(t)
		cfg.WatchProgressNotifyInterval = time.Second
		ctx, s := testSetup(t, cfg)
		storagetesting.RunTestWatchDispatchBookmarkEvents(ctx, t, s, false)
	})
	run("SendInitialEventsBackwardCompatibility", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunSendInitialEventsBackwardCompatibility(ctx, t, s)
	})
	run("WatchSemantics", func(t *testing.T, ctx context.Context, s testStore) { storagetesting.RunWatchSemantics(ctx, t, s) })
	run("WatchSemanticInitialEventsExtended", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunWatchSemanticInitialEventsExtended(ctx, t, s)
	})
	run("WatchListMatchSingle", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunWatchListMatchSingle(ctx, t, s)
	})
	run("WatchErrorEventIsBlockingFurtherEvent", func(t *testing.T, ctx context.Context, s testStore) {
		storagetesting.RunWatchErrorIsBlockingFurtherEvents(ctx, t, s)
	})
}
