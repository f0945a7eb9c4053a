package admission

// Fresh is a lister with read-your-writes: Fresh reports whether the lister
// holds every write to its resource so far. The plugins written here read
// the lister then, and ask the server itself otherwise, so an object a
// client has just created, changed or deleted is what admission sees
// (kube-apiserver's plugins read informers that lag by milliseconds, and
// a test that creates a ServiceAccount or LimitRange and then a pod must
// not depend on them). Reading the lister saves a request through the
// whole handler chain for each lookup: a pod's create made four.
type Fresh[L any] struct {
	Lister L
	Fresh  func() bool
}

// get returns the lister when it is fresh.
func (f Fresh[L]) get() (L, bool) {
	if f.Fresh == nil || !f.Fresh() {
		var zero L
		return zero, false
	}
	return f.Lister, true
}
