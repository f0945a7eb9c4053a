package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/value"

	"github.com/kubeembed/apiserver/internal/globals"
)

// Messages kube-apiserver's etcd3 store returns for compacted reads; clients
// match on the 410 reason, people on the text, so they are kept identical.
const (
	msgListExpired  = "The resourceVersion for the provided list is too old."
	msgWatchExpired = "The resourceVersion for the provided watch is too old."
	msgContinueOld  = "The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter."
	msgInconsistentContinue = "The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
		"objects that were created, modified, or deleted between the time the first chunk was returned and now may " +
		"show up in the list."
)

// Config describes one resource's store on a Backend.
type Config struct {
	// Codec encodes objects to the bytes that are stored and decodes them.
	// Required.
	Codec runtime.Codec
	// Transformer transforms stored bytes (encryption at rest). Default: none.
	Transformer value.Transformer
	// Versioner reads and writes resourceVersions. Default:
	// storage.APIObjectVersioner.
	Versioner storage.Versioner
	// Prefix is prepended to every key, like etcd's --etcd-prefix
	// ("/registry"). Default "/".
	Prefix string
	// ResourcePrefix is the prefix every key passed to the store must have,
	// such as "/pods". Required.
	ResourcePrefix string
	// GroupResource names the resource in errors.
	GroupResource schema.GroupResource
	// NewFunc returns a new empty object; needed for bookmarks.
	NewFunc func() runtime.Object
	// NewListFunc returns a new empty list.
	NewListFunc func() runtime.Object
}

// store implements storage.Interface for one resource on a Backend.
type store struct {
	b              *Backend
	codec          runtime.Codec
	versioner      storage.Versioner
	transformer    atomic.Pointer[value.Transformer]
	pathPrefix     string
	resourcePrefix string
	gr             schema.GroupResource
	newFunc        func() runtime.Object
	newListFunc    func() runtime.Object

	sizeMu   sync.Mutex
	sizeKeys storage.KeysFunc
}

var _ storage.Interface = (*store)(nil)

// NewStore returns the storage.Interface of one resource on b.
func (b *Backend) NewStore(cfg Config) (storage.Interface, error) {
	return b.newStore(cfg)
}

func (b *Backend) newStore(cfg Config) (*store, error) {
	var errs []error
	if cfg.Codec == nil {
		errs = append(errs, errors.New("codec is required"))
	}
	switch {
	case cfg.ResourcePrefix == "":
		errs = append(errs, errors.New("resourcePrefix cannot be empty"))
	case cfg.ResourcePrefix == "/":
		errs = append(errs, errors.New("resourcePrefix cannot be /"))
	case !strings.HasPrefix(cfg.ResourcePrefix, "/"):
		errs = append(errs, errors.New("resourcePrefix needs to start from /"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("memory store for %v: %w", cfg.GroupResource, errors.Join(errs...))
	}
	pathPrefix := path.Join("/", cfg.Prefix)
	if !strings.HasSuffix(pathPrefix, "/") {
		pathPrefix += "/"
	}
	s := &store{
		b:              b,
		codec:          cfg.Codec,
		versioner:      cfg.Versioner,
		pathPrefix:     pathPrefix,
		resourcePrefix: cfg.ResourcePrefix,
		gr:             cfg.GroupResource,
		newFunc:        cfg.NewFunc,
		newListFunc:    cfg.NewListFunc,
	}
	if s.versioner == nil {
		s.versioner = storage.APIObjectVersioner{}
	}
	t := cfg.Transformer
	if t == nil {
		t = identity{}
	}
	s.transformer.Store(&t)
	return s, nil
}

// identity is the transformer used when none is configured.
type identity struct{}

func (identity) TransformFromStorage(_ context.Context, data []byte, _ value.Context) ([]byte, bool, error) {
	return data, false, nil
}

func (identity) TransformToStorage(_ context.Context, data []byte, _ value.Context) ([]byte, error) {
	return data, nil
}

func (s *store) xf() value.Transformer { return *s.transformer.Load() }

// Versioner implements storage.Interface.
func (s *store) Versioner() storage.Versioner { return s.versioner }

func (s *store) prepareKey(key string, recursive bool) (string, error) {
	k, err := storage.PrepareKey(s.resourcePrefix, key, recursive)
	if err != nil {
		return "", err
	}
	return s.pathPrefix + strings.TrimPrefix(k, "/"), nil
}

// authenticated data binds a transformed value to its key, as etcd3 does.
func dataCtx(key string) value.Context { return value.DefaultContext(key) }

// decode decodes stored (already untransformed) bytes into out at rev.
func (s *store) decode(data []byte, out runtime.Object, rev int64) error {
	if _, err := conversion.EnforcePtr(out); err != nil {
		return fmt.Errorf("unable to convert output object to pointer: %v", err)
	}
	if _, _, err := s.codec.Decode(data, nil, out); err != nil {
		return err
	}
	// Failing to set the version does not make the object unreadable.
	_ = s.versioner.UpdateObject(out, uint64(rev))
	return nil
}

// decodeVersion decodes a stored version's (untransformed) bytes into out at
// rev, or copies what s decoded from them before (memo): deep unless out is
// an item of a list (recallInto).
func (s *store) decodeVersion(data []byte, m *memo, out runtime.Object, rev int64, deep bool) error {
	if s.recallInto(m, out, deep) {
		_ = s.versioner.UpdateObject(out, uint64(rev))
		return nil
	}
	if err := s.decode(data, out, rev); err != nil {
		return err
	}
	s.remember(m, out)
	return nil
}

// Get implements storage.Interface.
func (s *store) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	k, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	item, found, rev, _ := s.b.get(k, 0)
	if err := s.validateMinimumResourceVersion(opts.ResourceVersion, uint64(rev)); err != nil {
		return err
	}
	if !found {
		if opts.IgnoreNotFound {
			return runtime.SetZeroValue(out)
		}
		return storage.NewKeyNotFoundError(k, 0)
	}
	data, _, err := s.xf().TransformFromStorage(ctx, item.value, dataCtx(k))
	if err != nil {
		if reportCorrupt() {
			return storage.NewCorruptObjError(key, &corruptObjectError{err: err})
		}
		return storage.NewInternalError(err)
	}
	if err := s.decodeVersion(data, item.memo, out, item.modRev, true); err != nil {
		if reportCorrupt() {
			return storage.NewCorruptObjError(key, &corruptObjectError{err: err, undecodable: true, revision: item.modRev})
		}
		return err
	}
	return nil
}

func (s *store) validateMinimumResourceVersion(minimum string, actual uint64) error {
	if minimum == "" {
		return nil
	}
	rv, err := s.versioner.ParseResourceVersion(minimum)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	if rv > actual {
		return storage.NewTooLargeResourceVersionError(rv, actual, 0)
	}
	return nil
}

// Create implements storage.Interface.
func (s *store) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	k, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	if v, err := s.versioner.ObjectResourceVersion(obj); err == nil && v != 0 {
		return storage.ErrResourceVersionSetOnCreate
	}
	if err := s.versioner.PrepareObjectForStorage(obj); err != nil {
		return fmt.Errorf("PrepareObjectForStorage failed: %v", err)
	}
	data, err := runtime.Encode(s.codec, obj)
	if err != nil {
		return err
	}
	stored, err := s.xf().TransformToStorage(ctx, data, dataCtx(k))
	if err != nil {
		return storage.NewInternalError(err)
	}
	res := s.b.put(k, stored, 0, ttl)
	if !res.succeeded {
		return storage.NewKeyExistsError(k, 0)
	}
	if out != nil {
		return s.decode(data, out, res.rev)
	}
	return nil
}

// objState is an object as read for an update or delete.
type objState struct {
	obj   runtime.Object
	meta  storage.ResponseMeta
	rev   int64
	data  []byte // untransformed bytes
	stale bool
}

// stateFromKV decodes a stored value. With expectCorrupt (unsafe deletion of
// undecodable objects), an object that decodes is an error and one that does
// not is returned with obj nil.
func (s *store) stateFromKV(ctx context.Context, key string, item kv, found bool, v reflect.Value, ignoreNotFound, expectCorrupt bool) (*objState, error) {
	st := &objState{}
	if u, ok := v.Addr().Interface().(runtime.Unstructured); ok {
		st.obj = u.NewEmptyInstance()
	} else {
		st.obj = reflect.New(v.Type()).Interface().(runtime.Object)
	}
	if !found {
		if !ignoreNotFound {
			return nil, storage.NewKeyNotFoundError(key, 0)
		}
		if err := runtime.SetZeroValue(st.obj); err != nil {
			return nil, err
		}
		return st, nil
	}
	st.rev = item.modRev
	st.meta.ResourceVersion = uint64(item.modRev)
	data, stale, err := s.xf().TransformFromStorage(ctx, item.value, dataCtx(key))
	if err != nil {
		if !expectCorrupt {
			return nil, storage.NewInternalError(err)
		}
		st.obj, st.stale = nil, true
		return st, nil
	}
	st.data, st.stale = data, stale
	if err := s.decodeVersion(data, item.memo, st.obj, st.rev, true); err != nil {
		if !expectCorrupt {
			return nil, err
		}
		st.obj = nil
		return st, nil
	}
	if expectCorrupt {
		return nil, storage.NewInvalidObjError(key, "unsafe deletion is not allowed because the object is decodable from storage")
	}
	return st, nil
}

func (s *store) currentState(ctx context.Context, key string, v reflect.Value, ignoreNotFound, expectCorrupt bool) func() (*objState, error) {
	return func() (*objState, error) {
		item, found, _, _ := s.b.get(key, 0)
		return s.stateFromKV(ctx, key, item, found, v, ignoreNotFound, expectCorrupt)
	}
}

// stateFromObject builds the state of a caller-supplied cached object.
func (s *store) stateFromObject(obj runtime.Object) (*objState, error) {
	rv, err := s.versioner.ObjectResourceVersion(obj)
	if err != nil {
		return nil, fmt.Errorf("couldn't get resource version: %v", err)
	}
	st := &objState{obj: obj, rev: int64(rv)}
	st.meta.ResourceVersion = rv
	// The stored form has no resourceVersion; clear it to encode, then restore.
	if err := s.versioner.PrepareObjectForStorage(obj); err != nil {
		return nil, fmt.Errorf("PrepareObjectForStorage failed: %v", err)
	}
	st.data, err = runtime.Encode(s.codec, obj)
	if err != nil {
		return nil, err
	}
	_ = s.versioner.UpdateObject(st.obj, rv)
	return st, nil
}

// initialState starts an update or delete from the caller's cached object
// when there is one, saving a read (it may be stale: isCurrent is false), and
// from storage otherwise.
func (s *store) initialState(cached runtime.Object, current func() (*objState, error)) (st *objState, isCurrent bool, err error) {
	if cached != nil {
		st, err = s.stateFromObject(cached)
		return st, false, err
	}
	st, err = current()
	return st, true, err
}

// Delete implements storage.Interface.
func (s *store) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	k, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	v, err := conversion.EnforcePtr(out)
	if err != nil {
		return fmt.Errorf("unable to convert output object to pointer: %v", err)
	}
	expectCorrupt := opts.ExpectTransformOrDecodeError &&
		globals.Features().Enabled(features.AllowUnsafeMalformedObjectDeletion)
	current := s.currentState(ctx, k, v, false, expectCorrupt)

	cached := cachedExistingObject
	if expectCorrupt {
		cached = nil // the cached object decoded; storage is what must not
	}
	st, isCurrent, err := s.initialState(cached, current)
	if err != nil {
		return err
	}
	for {
		// A check that fails on possibly stale cached data is retried on
		// fresh data; if the data was current after all, its error stands.
		checkErr := preconditions.Check(k, st.obj)
		if checkErr == nil {
			checkErr = validateDeletion(ctx, st.obj)
		}
		if checkErr != nil {
			if isCurrent {
				return checkErr
			}
			cachedRev := st.rev
			if st, err = current(); err != nil {
				return err
			}
			isCurrent = true
			if st.rev == cachedRev {
				return checkErr
			}
			continue
		}
		res := s.b.del(k, st.rev)
		if !res.succeeded {
			if st, err = s.stateFromKV(ctx, k, res.current, res.exists, v, false, expectCorrupt); err != nil {
				return err
			}
			isCurrent = true
			continue
		}
		if expectCorrupt {
			return nil
		}
		return s.decode(st.data, out, res.rev)
	}
}

// GuaranteedUpdate implements storage.Interface.
func (s *store) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	k, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	v, err := conversion.EnforcePtr(destination)
	if err != nil {
		return fmt.Errorf("unable to convert output object to pointer: %v", err)
	}
	a := &attempt{current: s.currentState(ctx, k, v, ignoreNotFound, false)}
	if a.st, a.isCurrent, err = s.initialState(cachedExistingObject, a.current); err != nil {
		return err
	}
	for {
		if err := preconditions.Check(k, a.st.obj); err != nil {
			if a.isCurrent {
				return err
			}
			if err := a.refresh(); err != nil {
				return err
			}
			continue
		}
		ret, ttl, err := s.updated(a.st, tryUpdate)
		if err != nil {
			if a.isCurrent {
				return err
			}
			// The suggestion may have been stale: retry on fresh data unless
			// it was current after all.
			cachedRev := a.st.rev
			if err := a.refresh(); err != nil {
				return err
			}
			if a.st.rev == cachedRev {
				return err
			}
			continue
		}
		data, err := runtime.Encode(s.codec, ret)
		if err != nil {
			return err
		}
		if same, again, err := a.unchanged(data); err != nil {
			return err
		} else if again {
			continue
		} else if same {
			return s.decode(a.st.data, destination, a.st.rev)
		}
		stored, err := s.xf().TransformToStorage(ctx, data, dataCtx(k))
		if err != nil {
			return storage.NewInternalError(err)
		}
		res := s.b.put(k, stored, a.st.rev, ttl)
		if !res.succeeded {
			if a.st, err = s.stateFromKV(ctx, k, res.current, res.exists, v, ignoreNotFound, false); err != nil {
				return err
			}
			a.isCurrent = true
			continue
		}
		return s.decode(data, destination, res.rev)
	}
}

// attempt is what GuaranteedUpdate is updating: the object's state, and
// whether it was read from the store (not a caller's suggestion).
type attempt struct {
	st        *objState
	isCurrent bool
	current   func() (*objState, error)
}

// refresh reads the object's state from the store.
func (a *attempt) refresh() error {
	st, err := a.current()
	if err != nil {
		return err
	}
	a.st, a.isCurrent = st, true
	return nil
}

// unchanged reports whether data is what is stored, so that nothing is
// written. The comparison must be against what is stored now, not a stale
// suggestion: if it was against a suggestion, the state is read again, and
// if data differs from it the update is tried again on it.
func (a *attempt) unchanged(data []byte) (same, again bool, err error) {
	if a.st.stale || !bytes.Equal(data, a.st.data) {
		return false, false, nil
	}
	if !a.isCurrent {
		if err := a.refresh(); err != nil {
			return false, false, err
		}
		if !bytes.Equal(data, a.st.data) {
			return false, true, nil
		}
	}
	return !a.st.stale, false, nil
}

// updated runs tryUpdate on st and prepares its answer for storage.
func (s *store) updated(st *objState, tryUpdate storage.UpdateFunc) (ret runtime.Object, ttl uint64, err error) {
	ret, ttlPtr, err := tryUpdate(st.obj, st.meta)
	if err != nil {
		return nil, 0, err
	}
	if err := s.versioner.PrepareObjectForStorage(ret); err != nil {
		return nil, 0, fmt.Errorf("PrepareObjectForStorage failed: %v", err)
	}
	if ttlPtr != nil {
		ttl = *ttlPtr
	}
	return ret, ttl, nil
}

// Stats implements storage.Interface.
func (s *store) Stats(ctx context.Context) (storage.Stats, error) {
	prefix, err := s.prepareKey(s.resourcePrefix, true)
	if err != nil {
		return storage.Stats{}, err
	}
	n, size := s.b.count(prefix)
	st := storage.Stats{ObjectCount: n}
	s.sizeMu.Lock()
	sized := s.sizeKeys != nil
	s.sizeMu.Unlock()
	if sized && n > 0 {
		st.EstimatedAverageObjectSizeBytes = size / n
	}
	return st, nil
}

// EnableResourceSizeEstimation implements storage.Interface. Sizes are exact
// here, so the keys function is only remembered as the switch.
func (s *store) EnableResourceSizeEstimation(keys storage.KeysFunc) error {
	if keys == nil {
		return errors.New("KeysFunc cannot be nil")
	}
	s.sizeMu.Lock()
	defer s.sizeMu.Unlock()
	if s.sizeKeys != nil {
		return errors.New("resourceSizeEstimator already enabled")
	}
	s.sizeKeys = keys
	return nil
}

// ReadinessCheck implements storage.Interface.
func (s *store) ReadinessCheck() error {
	select {
	case <-s.b.done:
		return ErrClosed
	default:
		return nil
	}
}

// RequestWatchProgress implements storage.Interface.
func (s *store) RequestWatchProgress(context.Context) error {
	s.b.requestProgress()
	return nil
}

// GetCurrentResourceVersion implements storage.Interface.
func (s *store) GetCurrentResourceVersion(context.Context) (uint64, error) {
	return uint64(s.b.Revision()), nil
}

// CompactRevision implements storage.Interface.
func (s *store) CompactRevision() int64 { return s.b.CompactRevision() }

// GetList implements storage.Interface.
func (s *store) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	keyPrefix, err := s.prepareKey(key, opts.Recursive)
	if err != nil {
		return err
	}
	listPtr, err := meta.GetItemsPtr(listObj)
	if err != nil {
		return err
	}
	v, err := conversion.EnforcePtr(listPtr)
	if err != nil || v.Kind() != reflect.Slice {
		return fmt.Errorf("need ptr to slice: %v", err)
	}
	withRev, continueKey, err := storage.ValidateListOptions(keyPrefix, s.versioner, opts)
	if err != nil {
		return err
	}
	l := &listing{s: s, ctx: ctx, opts: opts, keyPrefix: keyPrefix, continueKey: continueKey,
		withRev: withRev, items: v, newItem: newItemFunc(listObj, v)}
	if opts.Recursive {
		err = l.pages()
	} else {
		err = l.one()
	}
	if err == nil {
		err = l.corrupt.statusError(s, false)
	}
	if err != nil {
		return err
	}
	cont, remaining, err := storage.PrepareContinueToken(l.lastKey, keyPrefix, l.withRev, l.count, l.hasMore, opts)
	if err != nil {
		return err
	}
	if v.IsNil() {
		v.Set(reflect.MakeSlice(v.Type(), 0, 0))
	}
	if err := s.versioner.UpdateList(listObj, uint64(l.withRev), cont, remaining); err != nil {
		return err
	}
	if globals.Features().Enabled(features.ShardedListAndWatch) {
		opts.Predicate.SetShardInfoOnList(listObj)
	}
	return nil
}

// listing is one GetList: what it read so far.
type listing struct {
	s                      *store
	ctx                    context.Context
	opts                   storage.ListOptions
	keyPrefix, continueKey string
	withRev                int64
	items                  reflect.Value
	newItem                func() runtime.Object

	lastKey string
	hasMore bool
	count   int64
	corrupt corruptList
}

// one reads the one key of a non-recursive list.
func (l *listing) one() error {
	item, found, rev, err := l.s.b.get(l.keyPrefix, l.withRev)
	if err != nil {
		return l.s.listError(err, l.withRev, false, l.continueKey, l.keyPrefix)
	}
	if err := l.atRevision(rev); err != nil {
		return err
	}
	if !found {
		return nil
	}
	return l.add(item)
}

// pages reads like etcd3's store: a selector may drop most of a page, so
// the page size doubles up to maxPage, and decoding (the real cost here)
// stops as soon as the limit is filled.
func (l *listing) pages() error {
	pred := l.opts.Predicate
	paging := pred.Limit > 0
	limit, from := pred.Limit, l.continueKey
	for {
		l.s.b.ranges.Add(1)
		res, err := l.s.b.rangeKeys(l.keyPrefix, from, l.withRev, limit)
		if err != nil {
			return l.s.listError(err, l.withRev, len(pred.Continue) > 0, l.continueKey, l.keyPrefix)
		}
		if err := l.atRevision(res.rev); err != nil { // later pages read the same snapshot
			return err
		}
		l.count = res.count
		if pred.Empty() {
			growSlice(l.items, len(res.kvs))
		}
		limitReached, err := l.addAll(res.kvs)
		releaseKVs(res.kvs)
		if err != nil {
			return err
		}
		l.hasMore = res.more || limitReached
		if limitReached || !res.more || (paging && int64(l.items.Len()) >= pred.Limit) {
			return nil
		}
		from = l.lastKey + "\x00"
		if limit < maxPage {
			limit = min(limit*2, maxPage)
		}
	}
}

// atRevision fixes the revision the list reads at, the backend's current
// one unless the list asked for one.
func (l *listing) atRevision(rev int64) error {
	if l.withRev != 0 {
		return nil
	}
	if err := l.s.validateMinimumResourceVersion(l.opts.ResourceVersion, uint64(rev)); err != nil {
		return err
	}
	l.withRev = rev
	return nil
}

// addAll adds the items read until a page is full (limitReached).
func (l *listing) addAll(kvs []kv) (limitReached bool, err error) {
	pred := l.opts.Predicate
	for _, item := range kvs {
		if pred.Limit > 0 && int64(l.items.Len()) >= pred.Limit {
			return true, nil
		}
		l.lastKey = item.key
		if err := l.add(item); err != nil {
			return false, err
		}
	}
	return false, nil
}

// add decodes item into the list if it matches; a corrupt one is noted and
// the list reads on.
func (l *listing) add(item kv) error {
	if err := l.s.appendItem(l.ctx, item, l.opts.Predicate, l.newItem, l.items); err != nil {
		return l.corrupt.add(l.s, item.key, err)
	}
	return nil
}

// maxPage caps the page size of one backend read in GetList, as etcd3's
// maxLimit does.
const maxPage = 10000

// appendItem decodes one stored item and appends it to v if pred matches.
// A typed item is decoded into the slice's next element, as kube-apiserver's
// watch cache appends its objects: an object of its own per item, then
// copied into the slice, was a third of a list's allocations (newItem is
// nil then).
func (s *store) appendItem(ctx context.Context, item kv, pred storage.SelectionPredicate, newItem func() runtime.Object, v reflect.Value) error {
	data, err := s.fromStorage(ctx, item)
	if err != nil {
		return err
	}
	if ctx.Err() != nil { // a list whose request ended stops, as etcd3's
		return storage.NewTimeoutError(item.key, "request did not complete within requested timeout")
	}
	n := v.Len()
	var obj runtime.Object
	if newItem != nil {
		obj = newItem()
	} else {
		if n == v.Cap() {
			growSlice(v, max(n, 16))
		}
		v.SetLen(n + 1)
		slot := v.Index(n)
		slot.SetZero()
		obj = slot.Addr().Interface().(runtime.Object)
	}
	err = s.decodeVersion(data, item.memo, obj, item.modRev, false)
	matched := false
	if err == nil {
		ok, matchErr := pred.Matches(obj)
		matched = matchErr == nil && ok
	}
	switch {
	case newItem == nil && !matched: // the slot is given back
		v.Index(n).SetZero()
		v.SetLen(n)
	case newItem != nil && matched:
		v.Set(reflect.Append(v, reflect.ValueOf(obj).Elem()))
	}
	if err != nil && reportCorrupt() {
		return &corruptObjectError{err: err, undecodable: true, revision: item.modRev}
	}
	return err
}

// fromStorage is an item's stored bytes as its transformer gives them back
// (as they are without one: no context for it to read).
func (s *store) fromStorage(ctx context.Context, item kv) ([]byte, error) {
	xf := s.xf()
	if _, none := xf.(identity); none {
		return item.value, nil
	}
	data, _, err := xf.TransformFromStorage(ctx, item.value, dataCtx(item.key))
	if err != nil {
		if reportCorrupt() {
			return nil, &corruptObjectError{err: err}
		}
		return nil, storage.NewInternalError(fmt.Errorf("unable to transform key %q: %w", item.key, err))
	}
	return data, nil
}

// listError maps backend read errors to the API errors etcd3's store returns.
func (s *store) listError(err error, withRev int64, paging bool, continueKey, keyPrefix string) error {
	switch {
	case errors.Is(err, ErrFutureRevision):
		return storage.NewTooLargeResourceVersionError(uint64(withRev), uint64(s.b.Revision()), 0)
	case errors.Is(err, ErrCompacted):
		if !paging {
			return apierrors.NewResourceExpired(msgListExpired)
		}
		// rv -1 lets the client continue at the latest revision, knowingly
		// inconsistent.
		token, encErr := storage.EncodeContinue(continueKey, keyPrefix, -1)
		if encErr != nil {
			return apierrors.NewResourceExpired(msgContinueOld)
		}
		se := apierrors.NewResourceExpired(msgInconsistentContinue)
		se.ErrStatus.ListMeta.Continue = token
		return se
	}
	return err
}

func newItemFunc(listObj runtime.Object, v reflect.Value) func() runtime.Object {
	if ul, ok := listObj.(*unstructured.UnstructuredList); ok {
		if apiVersion := ul.GetAPIVersion(); apiVersion != "" {
			return func() runtime.Object {
				return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion}}
			}
		}
	}
	elem := v.Type().Elem()
	if elem.Kind() == reflect.Struct && reflect.PointerTo(elem).Implements(reflect.TypeFor[runtime.Object]()) {
		return nil // decoded in place (appendItem)
	}
	return func() runtime.Object { return reflect.New(elem).Interface().(runtime.Object) }
}

// growSlice makes room for n more items, capped so that a huge filtered list
// does not allocate up front.
func growSlice(v reflect.Value, n int) {
	const maxPrealloc = 2048
	if n > maxPrealloc {
		n = maxPrealloc
	}
	if v.Cap()-v.Len() >= n {
		return
	}
	grown := reflect.MakeSlice(v.Type(), v.Len(), v.Len()+n)
	reflect.Copy(grown, v)
	v.Set(grown)
}

// Watch implements storage.Interface.
func (s *store) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	k, err := s.prepareKey(key, opts.Recursive)
	if err != nil {
		return nil, err
	}
	rev, err := s.versioner.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	return s.watch(ctx, k, int64(rev), opts)
}
