package podautoscaler

import (
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// selectorStore holds the selector of each HPA's target by namespace (the
// HPAOptimizedSelectorStore of 1.37), to find pods two HPAs scale.
type selectorStore struct {
	mu         sync.RWMutex
	namespaces map[string]map[string]labels.Selector // namespace -> "namespace/name" -> selector
}

func newSelectorStore() *selectorStore {
	return &selectorStore{namespaces: map[string]map[string]labels.Selector{}}
}

func namespaceOf(key string) string {
	for i := range len(key) {
		if key[i] == '/' {
			return key[:i]
		}
	}
	return ""
}

// putIfAbsent registers key with sel unless it is registered.
func (s *selectorStore) putIfAbsent(key string, sel labels.Selector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := namespaceOf(key)
	if s.namespaces[ns] == nil {
		s.namespaces[ns] = map[string]labels.Selector{}
	}
	if _, ok := s.namespaces[ns][key]; !ok {
		s.namespaces[ns][key] = sel
	}
}

// putIfPresent sets the selector of a registered key, and reports whether
// it was registered (not deleted meanwhile).
func (s *selectorStore) putIfPresent(key string, sel labels.Selector) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.namespaces[namespaceOf(key)]
	if _, ok := m[key]; !ok {
		return false
	}
	m[key] = sel
	return true
}

func (s *selectorStore) delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := namespaceOf(key)
	delete(s.namespaces[ns], key)
	if len(s.namespaces[ns]) == 0 {
		delete(s.namespaces, ns)
	}
}

// matching are (up to limit of) the HPAs of namespace whose selector picks
// one of pods.
func (s *selectorStore) matching(namespace string, pods []*corev1.Pod, limit int) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	found := map[string]bool{}
	seen := map[string]bool{}
	for _, pod := range pods {
		set := labels.Set(pod.Labels)
		if seen[set.String()] {
			continue
		}
		seen[set.String()] = true
		for key, sel := range s.namespaces[namespace] {
			if !sel.Matches(set) {
				continue
			}
			found[key] = true
			if len(found) >= limit {
				return slices.Sorted(maps.Keys(found))
			}
		}
	}
	return slices.Sorted(maps.Keys(found))
}
