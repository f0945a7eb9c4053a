package memory

// This file runs the upstream storage conformance suite
// (k8s.io/apiserver/pkg/storage/testing) against the memory store, set up as
// etcd3's store_test.go and watcher_test.go set up the etcd3 store: the
// "example" API group, a prefix transformer, "/pods/" as resource prefix.
//
// Run* functions not run here, and why:
//   - RunTestGetListWithErrorAggregation, RunTestDeleteWithConflictAndMissingExpectedTransformOrDecodeError,
//     RunTestDeleteExpectedTransformOrDecodeError: they classify errors with
//     etcd3's unexported corruptObjectError (the "corrupt object" aggregator
//     and unsafe-deletion decoder wrappers live in package etcd3 and are
//     wired by its constructor); the memory store has no such type to return.
//     Unsafe deletion itself is covered by RunTestWatchWithUnsafeDelete and
//     RunTestDeleteWithSuggestionAndMissingExpectedTransformOrDecodeError.
//   - RunTestOptionalWatchBookmarksWithCorrectResourceVersion: optional, for
//     the watch cache; etcd3 does not run it either (bookmarks for
//     AllowWatchBookmarks come from the cacher, which kubeembed does not use).
//   - RunBenchmark*: benchmarks, run from memory_bench_test.go.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"k8s.io/apimachinery/pkg/api/apitesting"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	"k8s.io/apiserver/pkg/storage/value"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/kubeembed/apiserver/storage/internal/conformance"
)

const testValuePrefix = "test!"

func testScheme() (*runtime.Scheme, serializer.CodecFactory) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	utilruntime.Must(example.AddToScheme(scheme))
	utilruntime.Must(examplev1.AddToScheme(scheme))
	return scheme, serializer.NewCodecFactory(scheme)
}

type setup struct {
	backendOpts Options
	codec       runtime.Codec
	transformer value.Transformer
	prefix      string
}

type setupOption func(*setup)

func withBackend(o Options) setupOption               { return func(s *setup) { s.backendOpts = o } }
func withTransformer(t value.Transformer) setupOption { return func(s *setup) { s.transformer = t } }

func testSetup(t testing.TB, opts ...setupOption) (context.Context, *store) {
	t.Helper()
	_, codecs := testScheme()
	cfg := setup{
		codec:       apitesting.TestCodec(codecs, examplev1.SchemeGroupVersion),
		transformer: storagetesting.NewPrefixTransformer([]byte(testValuePrefix), false),
	}
	for _, o := range opts {
		o(&cfg)
	}
	b := NewBackend(cfg.backendOpts)
	t.Cleanup(func() { _ = b.Close() })
	s, err := b.newStore(Config{
		Codec:          cfg.codec,
		Transformer:    cfg.transformer,
		Prefix:         cfg.prefix,
		ResourcePrefix: "/pods/",
		GroupResource:  schema.GroupResource{Resource: "pods"},
		NewFunc:        func() runtime.Object { return &example.Pod{} },
		NewListFunc:    func() runtime.Object { return &example.PodList{} },
	})
	require.NoError(t, err)
	return context.Background(), s
}

// storeWithPrefixTransformer lets the suite swap the store's transformer.
type storeWithPrefixTransformer struct{ *store }

func (s storeWithPrefixTransformer) UpdatePrefixTransformer(modify storagetesting.PrefixTransformerModifier) func() {
	orig := s.transformer.Load()
	copied := *((*orig).(*storagetesting.PrefixTransformer))
	next := modify(&copied)
	s.transformer.Store(&next)
	return func() { s.transformer.Store(orig) }
}

type storeWithTransformerOverride struct{ *store }

func (s storeWithTransformerOverride) UpdateTransformer(modify storagetesting.TransformerModifier) func() {
	orig := s.transformer.Load()
	next := modify(*orig)
	s.transformer.Store(&next)
	return func() { s.transformer.Store(orig) }
}

// checkStorageInvariants checks what is stored under key: transformed bytes
// of an object without resourceVersion.
func checkStorageInvariants(s *store) storagetesting.KeyValidation {
	return func(ctx context.Context, t *testing.T, key string) {
		item, found, _, err := s.b.get(key, 0)
		require.NoError(t, err)
		require.True(t, found, "expecting non empty result on key %s", key)
		obj, err := runtime.Decode(s.codec, item.value[len(testValuePrefix):])
		require.NoError(t, err)
		pod := obj.(*example.Pod)
		if pod.ResourceVersion != "" {
			t.Errorf("stored object should have empty resource version")
		}
	}
}

// checkStorageCallsInvariants checks that lists decode only what they must
// and read the backend in doubling pages, as the etcd3 store does.
func checkStorageCallsInvariants(s *store) storagetesting.CallsValidation {
	transformer := (*s.transformer.Load()).(*storagetesting.PrefixTransformer)
	return func(t *testing.T, pageSize, estimatedProcessedObjects uint64) {
		if reads := transformer.GetReadsAndReset(); reads != estimatedProcessedObjects {
			t.Errorf("unexpected reads: %d, expected: %d", reads, estimatedProcessedObjects)
		}
		estimatedGetCalls := conformance.ExpectedRangeReads(pageSize, estimatedProcessedObjects, maxPage)
		if reads := uint64(s.b.ranges.Swap(0)); reads != estimatedGetCalls {
			t.Fatalf("unexpected range reads: %d, want: %d", reads, estimatedGetCalls)
		}
	}
}

// compactStorage compacts as kube-apiserver's etcd compactor does: it first
// records the compaction in a key of its own (one more revision), then
// compacts.
func compactStorage(s *store) storagetesting.Compaction {
	bump := increaseRV(s)
	return func(ctx context.Context, t *testing.T, resourceVersion string) {
		rv, err := storage.APIObjectVersioner{}.ParseResourceVersion(resourceVersion)
		require.NoError(t, err)
		bump(ctx, t)
		require.NoError(t, s.b.Compact(int64(rv)))
	}
}

// increaseRV writes a key outside the store's prefix, as the etcd3 tests put
// "increaseRV" straight into etcd.
func increaseRV(s *store) storagetesting.IncreaseRVFunc {
	return func(ctx context.Context, t *testing.T) int64 {
		item, _, _, err := s.b.get("/increaseRV", 0)
		require.NoError(t, err)
		res := s.b.put("/increaseRV", []byte("ok"), item.modRev, 0)
		require.True(t, res.succeeded)
		return res.rev
	}
}

func TestCreate(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestCreate(ctx, t, s, checkStorageInvariants(s))
}

func TestCreateWithTTL(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestCreateWithTTL(ctx, t, s)
}

func TestCreateWithKeyExist(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestCreateWithKeyExist(ctx, t, s)
}

func TestGet(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGet(ctx, t, s)
}

func TestUnconditionalDelete(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestUnconditionalDelete(ctx, t, s)
}

func TestConditionalDelete(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestConditionalDelete(ctx, t, s)
}

func TestDeleteWithSuggestion(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestDeleteWithSuggestion(ctx, t, s)
}

func TestDeleteWithSuggestionAndConflict(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestDeleteWithSuggestionAndConflict(ctx, t, s)
}

func TestDeleteWithSuggestionOfDeletedObject(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestDeleteWithSuggestionOfDeletedObject(ctx, t, s)
}

func TestValidateDeletionWithSuggestion(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestValidateDeletionWithSuggestion(ctx, t, s)
}

func TestValidateDeletionWithOnlySuggestionValid(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestValidateDeletionWithOnlySuggestionValid(ctx, t, s)
}

func TestDeleteWithConflict(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestDeleteWithConflict(ctx, t, s)
}

func TestDeleteWithSuggestionAndMissingExpectedTransformOrDecodeError(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.AllowUnsafeMalformedObjectDeletion, true)
	ctx, s := testSetup(t)
	storagetesting.RunTestDeleteWithSuggestionAndMissingExpectedTransformOrDecodeError(ctx, t, s)
}

func TestPreconditionalDeleteWithSuggestion(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestPreconditionalDeleteWithSuggestion(ctx, t, s)
}

func TestPreconditionalDeleteWithOnlySuggestionPass(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestPreconditionalDeleteWithOnlySuggestionPass(ctx, t, s)
}

func TestListPaging(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestListPaging(ctx, t, s)
}

func TestGetListNonRecursive(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGetListNonRecursive(ctx, t, increaseRV(s), s)
}

func TestGetListRecursivePrefix(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGetListRecursivePrefix(ctx, t, s)
}

func TestKeySchema(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestKeySchema(ctx, t, s)
}

func TestGetListWithoutErrorAggregation(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.AllowUnsafeMalformedObjectDeletion, false)
	ctx, s := testSetup(t)
	storagetesting.RunTestGetListWithoutErrorAggregation(ctx, t, storeWithTransformerOverride{s}, errors.New("bits flipped"))
}

func TestGuaranteedUpdate(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGuaranteedUpdate(ctx, t, storeWithPrefixTransformer{s}, checkStorageInvariants(s))
}

func TestGuaranteedUpdateWithTTL(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGuaranteedUpdateWithTTL(ctx, t, s)
}

func TestGuaranteedUpdateChecksStoredData(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGuaranteedUpdateChecksStoredData(ctx, t, storeWithPrefixTransformer{s})
}

func TestGuaranteedUpdateWithConflict(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGuaranteedUpdateWithConflict(ctx, t, s)
}

func TestGuaranteedUpdateWithSuggestionAndConflict(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGuaranteedUpdateWithSuggestionAndConflict(ctx, t, s)
}

// The suite expects a store that does not report corrupt objects as
// kube-apiserver does while AllowUnsafeMalformedObjectDeletion is on (Beta
// in 1.37; corrupt.go): etcd3's own test builds its store without that.
func TestTransformationFailure(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.AllowUnsafeMalformedObjectDeletion, false)
	ctx, s := testSetup(t)
	storagetesting.RunTestTransformationFailure(ctx, t, storeWithPrefixTransformer{s})
}

func TestList(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestList(ctx, t, s, compactStorage(s), false, nil)
}

func TestConsistentList(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestConsistentList(ctx, t, s, increaseRV(s), false, true, false)
}

func TestCompactRevision(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestCompactRevision(ctx, t, s, increaseRV(s), compactStorage(s))
}

func TestListContinuation(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestListContinuation(ctx, t, s, checkStorageCallsInvariants(s))
}

func TestListPaginationRareObject(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestListPaginationRareObject(ctx, t, s, checkStorageCallsInvariants(s))
}

func TestListContinuationWithFilter(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestListContinuationWithFilter(ctx, t, s, checkStorageCallsInvariants(s))
}

func TestNamespaceScopedList(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestNamespaceScopedList(ctx, t, s)
}

func TestListInconsistentContinuation(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestListInconsistentContinuation(ctx, t, s, compactStorage(s))
}

func TestListResourceVersionMatch(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestListResourceVersionMatch(ctx, t, storeWithPrefixTransformer{s})
}

func TestStats(t *testing.T) {
	for _, sized := range []bool{true, false} {
		t.Run(fmt.Sprintf("SizeBasedListCostEstimate=%v", sized), func(t *testing.T) {
			ctx, s := testSetup(t)
			if sized {
				require.NoError(t, s.EnableResourceSizeEstimation(func(context.Context) ([]string, error) { return nil, nil }))
			}
			storagetesting.RunTestStats(ctx, t, s, s.codec, *s.transformer.Load(), sized)
		})
	}
}

func TestWatch(t *testing.T) {
	run := func(name string, f func(t *testing.T, ctx context.Context, s *store)) {
		t.Run(name, func(t *testing.T) {
			ctx, s := testSetup(t)
			f(t, ctx, s)
		})
	}
	run("Watch", func(t *testing.T, ctx context.Context, s *store) { storagetesting.RunTestWatch(ctx, t, s) })
	run("ClusterScopedWatch", func(t *testing.T, ctx context.Context, s *store) { storagetesting.RunTestClusterScopedWatch(ctx, t, s) })
	run("NamespaceScopedWatch", func(t *testing.T, ctx context.Context, s *store) {
		storagetesting.RunTestNamespaceScopedWatch(ctx, t, s)
	})
	run("DeleteTriggerWatch", func(t *testing.T, ctx context.Context, s *store) { storagetesting.RunTestDeleteTriggerWatch(ctx, t, s) })
	run("WatchFromZero", func(t *testing.T, ctx context.Context, s *store) {
		storagetesting.RunTestWatchFromZero(ctx, t, s, compactStorage(s))
	})
	run("WatchFromNonZero", func(t *testing.T, ctx context.Context, s *store) { storagetesting.RunTestWatchFromNonZero(ctx, t, s) })
	run("DelayedWatchDelivery", func(t *testing.T, ctx context.Context, s *store) {
		storagetesting.RunTestDelayedWatchDelivery(ctx, t, s)
	})
	run("WatchError", func(t *testing.T, ctx context.Context, s *store) {
		storagetesting.RunTestWatchError(ctx, t, storeWithPrefixTransformer{s})
	})
	run("WatchContextCancel", func(t *testing.T, ctx context.Context, s *store) { storagetesting.RunTestWatchContextCancel(ctx, t, s) })
	run("WatcherTimeout", func(t *testing.T, ctx context.Context, s *store) { storagetesting.RunTestWatcherTimeout(ctx, t, s) })
	run("WatchDeleteEventObjectHaveLatestRV", func(t *testing.T, ctx context.Context, s *store) {
		storagetesting.RunTestWatchDeleteEventObjectHaveLatestRV(ctx, t, s)
	})
	run("WatchInitializationSignal", func(t *testing.T, ctx context.Context, s *store) {
		storagetesting.RunTestWatchInitializationSignal(ctx, t, s)
	})
	t.Run("ProgressNotify", func(t *testing.T) {
		ctx, s := testSetup(t, withBackend(Options{ProgressNotifyInterval: time.Second}))
		storagetesting.RunOptionalTestProgressNotify(ctx, t, s, increaseRV(s))
	})
	t.Run("WatchWithUnsafeDelete", func(t *testing.T) {
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.AllowUnsafeMalformedObjectDeletion, true)
		ctx, s := testSetup(t)
		storagetesting.RunTestWatchWithUnsafeDelete(ctx, t, storeWithTransformerOverride{s}, errors.New("bits flipped"))
	})
	t.Run("WatchDispatchBookmarkEvents", func(t *testing.T) {
		ctx, s := testSetup(t, withBackend(Options{ProgressNotifyInterval: time.Second}))
		storagetesting.RunTestWatchDispatchBookmarkEvents(ctx, t, s, false)
	})
	run("SendInitialEventsBackwardCompatibility", func(t *testing.T, ctx context.Context, s *store) {
		storagetesting.RunSendInitialEventsBackwardCompatibility(ctx, t, s)
	})
	run("WatchSemantics", func(t *testing.T, ctx context.Context, s *store) { storagetesting.RunWatchSemantics(ctx, t, s) })
	run("WatchSemanticInitialEventsExtended", func(t *testing.T, ctx context.Context, s *store) {
		storagetesting.RunWatchSemanticInitialEventsExtended(ctx, t, s)
	})
	run("WatchListMatchSingle", func(t *testing.T, ctx context.Context, s *store) { storagetesting.RunWatchListMatchSingle(ctx, t, s) })
	run("WatchErrorEventIsBlockingFurtherEvent", func(t *testing.T, ctx context.Context, s *store) {
		storagetesting.RunWatchErrorIsBlockingFurtherEvents(ctx, t, storeWithPrefixTransformer{s})
	})
}
