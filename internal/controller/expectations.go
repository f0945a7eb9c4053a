package controller

import (
	"sync"
	"time"
)

// expectationsTimeout is upstream's ExpectationsTimeout: expectations older
// than this are given up on.
const expectationsTimeout = 5 * time.Minute

// Expectations are upstream's ControllerExpectations: per controller key,
// how many creates and which deletes its last sync made that the informer
// has not shown yet. A sync creates or deletes again only once they are
// all seen (or expectationsTimeout passes). The ReplicaSet, DaemonSet and
// Job controllers keep them for their pods.
type Expectations struct {
	mu      sync.Mutex
	entries map[string]*expected
}

type expected struct {
	add, del int
	deleting map[string]bool // pod keys
	at       time.Time
}

// NewExpectations returns empty expectations.
func NewExpectations() *Expectations { return &Expectations{entries: map[string]*expected{}} }

// Satisfied reports whether the controller key may create or delete pods.
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.entries[key]
	return !ok || x.add <= 0 && x.del <= 0 || time.Since(x.at) > expectationsTimeout
}

// ExpectCreations replaces the key's expectations with n creates.
func (e *Expectations) ExpectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entries[key] = &expected{add: n, at: time.Now()}
}

// ExpectDeletions replaces the key's expectations with the deletes of pods.
func (e *Expectations) ExpectDeletions(key string, pods []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := &expected{del: len(pods), deleting: map[string]bool{}, at: time.Now()}
	for _, p := range pods {
		x.deleting[p] = true
	}
	e.entries[key] = x
}

// Created: a pod the key created was seen (or a create is given up).
func (e *Expectations) Created(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.entries[key]; ok {
		x.add--
	}
}

// Deleted: the pod was seen deleted (or its delete failed).
func (e *Expectations) Deleted(key, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.entries[key]; ok && x.deleting[pod] {
		delete(x.deleting, pod)
		x.del--
	}
}

// Forget drops the key's expectations (its owner is gone).
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.entries, key)
}
