package timing

import (
	"context"
	"math/rand/v2"
	goruntime "runtime"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/kubeembed/apiserver/storage"
)

// Backend returns b with p's timing: each store it makes waits p.Write
// before each write and delays each event of each watch by p.Watch. The
// draws come from p.Seed (use Seeded first for a random one). Close closes
// b. The server wraps its backend so when Options.Timing is set; an API
// server built on storage.Decorator can wrap its own.
func Backend(b storage.Backend, p Profile) storage.Backend {
	return &slowBackend{Backend: b, profile: p, rand: rand.New(rand.NewPCG(uint64(p.Seed), 0x6b756265))}
}

type slowBackend struct {
	storage.Backend
	profile Profile
	// rand draws the write latencies of every store, and each watch's own
	// seed: one source, so that a seed draws one sequence.
	mu   sync.Mutex
	rand *rand.Rand
}

// Store implements storage.Backend.
func (b *slowBackend) Store(cfg storage.ResourceConfig) (k8sstorage.Interface, error) {
	st, err := b.Backend.Store(cfg)
	if err != nil {
		return nil, err
	}
	return slowStore{Interface: st, b: b}, nil
}

func (b *slowBackend) writeLatency() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.profile.Write.draw(b.rand)
}

// watchRand is the source of one watch's delays, drawn from the backend's
// so that watches draw independently of each other.
func (b *slowBackend) watchRand() *rand.Rand {
	b.mu.Lock()
	defer b.mu.Unlock()
	return rand.New(rand.NewPCG(b.rand.Uint64(), b.rand.Uint64()))
}

// timerSlack is how late a Go timer may fire: on Linux the runtime's
// netpoller waits in whole milliseconds, so a 200 µs timer measured 1.1 ms
// (2 cores, Go 1.26), which would round every etcd-sized delay up to a
// millisecond. The last timerSlack of a delay is waited by yielding in a
// loop instead: exact to a few µs, at the cost of a busy core meanwhile.
const timerSlack = 1500 * time.Microsecond

// wait waits for d, or until ctx ends.
func wait(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	if d > timerSlack {
		t := time.NewTimer(d - timerSlack)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		goruntime.Gosched()
	}
	return ctx.Err()
}

// slowStore is one resource's store with the backend's timing.
type slowStore struct {
	k8sstorage.Interface
	b *slowBackend
}

func (s slowStore) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	if err := wait(ctx, s.b.writeLatency()); err != nil {
		return err
	}
	return s.Interface.Create(ctx, key, obj, out, ttl)
}

func (s slowStore) Delete(ctx context.Context, key string, out runtime.Object, pre *k8sstorage.Preconditions,
	validate k8sstorage.ValidateObjectFunc, cached runtime.Object, opts k8sstorage.DeleteOptions) error {
	if err := wait(ctx, s.b.writeLatency()); err != nil {
		return err
	}
	return s.Interface.Delete(ctx, key, out, pre, validate, cached, opts)
}

// GuaranteedUpdate waits between computing the new object and committing
// it, where an etcd transaction spends its time: an update that read the
// object before the wait conflicts with one that committed during it and
// is tried again, as on etcd.
func (s slowStore) GuaranteedUpdate(ctx context.Context, key string, dest runtime.Object, ignoreNotFound bool,
	pre *k8sstorage.Preconditions, tryUpdate k8sstorage.UpdateFunc, cached runtime.Object) error {
	slow := func(in runtime.Object, meta k8sstorage.ResponseMeta) (runtime.Object, *uint64, error) {
		out, ttl, err := tryUpdate(in, meta)
		if err != nil {
			return out, ttl, err
		}
		return out, ttl, wait(ctx, s.b.writeLatency())
	}
	return s.Interface.GuaranteedUpdate(ctx, key, dest, ignoreNotFound, pre, slow, cached)
}

func (s slowStore) Watch(ctx context.Context, key string, opts k8sstorage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil || len(s.b.profile.Watch) == 0 {
		return w, err
	}
	return delayed(ctx, w, s.b.profile.Watch, s.b.watchRand()), nil
}
