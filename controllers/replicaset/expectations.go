package replicaset

import (
	"sync"
	"time"
)

// expectationsTimeout is upstream's ExpectationsTimeout: expectations older
// than this are given up on.
const expectationsTimeout = 5 * time.Minute

// expectations are upstream's ControllerExpectations: per controller, how
// many creates and which deletes its last sync made that the informer has
// not shown yet. A sync manages pods only once they are all seen.
type expectations struct {
	mu      sync.Mutex
	entries map[string]*expected
}

type expected struct {
	add, del int
	deleting map[string]bool // pod keys
	at       time.Time
}

func newExpectations() *expectations { return &expectations{entries: map[string]*expected{}} }

// satisfied reports whether the controller key may create or delete pods.
func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.entries[key]
	return !ok || x.add <= 0 && x.del <= 0 || time.Since(x.at) > expectationsTimeout
}

// expectCreations replaces the key's expectations with n creates.
func (e *expectations) expectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entries[key] = &expected{add: n, at: time.Now()}
}

// expectDeletions replaces the key's expectations with the deletes of pods.
func (e *expectations) expectDeletions(key string, pods []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := &expected{del: len(pods), deleting: map[string]bool{}, at: time.Now()}
	for _, p := range pods {
		x.deleting[p] = true
	}
	e.entries[key] = x
}

// created: a pod the key created was seen (or a create is given up).
func (e *expectations) created(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.entries[key]; ok {
		x.add--
	}
}

// deleted: the pod was seen deleted (or its delete failed).
func (e *expectations) deleted(key, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.entries[key]; ok && x.deleting[pod] {
		delete(x.deleting, pod)
		x.del--
	}
}

func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.entries, key)
}
