package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// runWorkers runs one worker per client until o.Duration is over and
// returns how long they ran, their merged latencies and what they found.
func runWorkers(ctx context.Context, clients []kubernetes.Interface, o Options, l *ledger, hot []string) (time.Duration, *stats, []string) {
	start := time.Now()
	end := start.Add(o.Duration)
	workers := make([]*worker, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		workers[i] = &worker{id: i, ctx: ctx, cms: c.CoreV1().ConfigMaps(o.Namespace), ns: o.Namespace, l: l, hot: hot,
			rng: rand.New(rand.NewPCG(uint64(i), 27)), cache: map[string]*corev1.ConfigMap{}}
		wg.Go(func() { workers[i].run(end) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	all, problems := &stats{}, []string(nil)
	for _, w := range workers {
		all.merge(&w.st)
		problems = append(problems, w.problems...)
	}
	return elapsed, all, problems
}

// worker is one client's loop. Its private objects are its alone, so
// their history is the worker's; hot objects are everyone's.
type worker struct {
	id       int
	ctx      context.Context
	cms      corev1client.ConfigMapInterface
	ns       string
	l        *ledger
	hot      []string
	rng      *rand.Rand
	cache    map[string]*corev1.ConfigMap // the last copy seen of an object
	live     []string                     // private objects not deleted
	created  int
	seq      int
	st       stats
	problems []string
}

func (w *worker) run(end time.Time) {
	for time.Now().Before(end) && w.ctx.Err() == nil {
		switch r := w.rng.IntN(100); {
		case r < 20:
			w.create()
		case r < 45:
			w.update(w.hot[w.rng.IntN(len(w.hot))])
		case r < 60 && len(w.live) > 0:
			w.update(w.live[w.rng.IntN(len(w.live))])
		case r < 80:
			w.apply()
		case r < 95:
			w.delete()
		default:
			if _, err := listAll(w.ctx, w.cms, &w.st); err != nil {
				w.problems = append(w.problems, fmt.Sprintf("worker %d: list: %v", w.id, err))
			}
		}
	}
}

// do times one request of verb and counts its outcome.
func (w *worker) do(verb string, f func(ctx context.Context) error) error {
	ctx, cancel := guard(w.ctx)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	w.st.add(verb, time.Since(start))
	w.st.count(verb, outcome(err))
	return err
}

func (w *worker) value() string {
	w.seq++
	return fmt.Sprintf("w%d-%d", w.id, w.seq)
}

func (w *worker) create() {
	if len(w.live) >= maxPrivate {
		w.delete()
		return
	}
	w.created++
	name, shard := fmt.Sprintf("w%02d-%05d", w.id, w.created), (w.id*7+w.created)%shards
	var cm *corev1.ConfigMap
	err := w.do("create", func(ctx context.Context) (err error) {
		cm, err = w.cms.Create(ctx, newObject(name, shard, w.value()), metav1.CreateOptions{})
		return err
	})
	switch outcome(err) {
	case "":
		w.l.wrote(cm)
		w.cache[name], w.live = cm, append(w.live, name)
	case "unknown":
		w.l.unsure(name, shard)
	}
}

// update writes a new value from the cached copy; on a conflict it gets
// the object and tries again, as a controller's update loop does.
func (w *worker) update(name string) {
	for range 50 {
		cm := w.cache[name]
		if cm == nil && w.get(name) != nil {
			return
		}
		cm = w.cache[name].DeepCopy()
		cm.Data["v"] = w.value()
		var out *corev1.ConfigMap
		err := w.do("update", func(ctx context.Context) (err error) {
			out, err = w.cms.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		})
		switch outcome(err) {
		case "":
			w.l.wrote(out)
			w.cache[name] = out
			return
		case "conflict":
			delete(w.cache, name)
			continue
		case "unknown":
			w.l.unsure(name, -1)
		}
		w.problems = append(w.problems, fmt.Sprintf("worker %d: update %s: %v", w.id, name, err))
		return
	}
	w.problems = append(w.problems, fmt.Sprintf("worker %d: update %s: 50 conflicts in a row", w.id, name))
}

func (w *worker) get(name string) error {
	var cm *corev1.ConfigMap
	err := w.do("get", func(ctx context.Context) (err error) {
		cm, err = w.cms.Get(ctx, name, metav1.GetOptions{})
		return err
	})
	if err != nil {
		w.problems = append(w.problems, fmt.Sprintf("worker %d: get %s: %v", w.id, name, err))
		return err
	}
	w.cache[name] = cm
	return nil
}

// apply sets the worker's own field of a hot or a private object by
// server-side apply (never creating: the object exists).
func (w *worker) apply() {
	name := w.hot[w.rng.IntN(len(w.hot))]
	if len(w.live) > 0 && w.rng.IntN(2) == 0 {
		name = w.live[w.rng.IntN(len(w.live))]
	}
	field := "a" + strconv.Itoa(w.id)
	cfg := corev1ac.ConfigMap(name, w.ns).WithData(map[string]string{field: w.value()})
	var out *corev1.ConfigMap
	err := w.do("apply", func(ctx context.Context) (err error) {
		out, err = w.cms.Apply(ctx, cfg, metav1.ApplyOptions{FieldManager: "load-" + field, Force: true})
		return err
	})
	switch outcome(err) {
	case "":
		w.l.wrote(out)
		w.cache[name] = out
	case "unknown":
		w.l.unsure(name, -1)
		fallthrough
	default:
		w.problems = append(w.problems, fmt.Sprintf("worker %d: apply %s: %v", w.id, name, err))
	}
}

func (w *worker) delete() {
	if len(w.live) == 0 {
		w.create()
		return
	}
	i := w.rng.IntN(len(w.live))
	name := w.live[i]
	w.live[i] = w.live[len(w.live)-1]
	w.live = w.live[:len(w.live)-1]
	delete(w.cache, name)
	err := w.do("delete", func(ctx context.Context) error {
		return w.cms.Delete(ctx, name, metav1.DeleteOptions{})
	})
	switch outcome(err) {
	case "":
		w.l.deleted(name)
	case "unknown":
		w.l.unsure(name, -1)
		fallthrough
	default:
		w.problems = append(w.problems, fmt.Sprintf("worker %d: delete %s: %v", w.id, name, err))
	}
}

// listAll lists the namespace in pages of pageSize, timing each page as a
// "list", and returns its objects by name. A page whose continue token
// expired (410) restarts the list; a name on two pages is an error.
func listAll(ctx context.Context, cms corev1client.ConfigMapInterface, st *stats) (map[string]*corev1.ConfigMap, error) {
	for range 10 {
		out, err := listPages(ctx, cms, st)
		if outcome(err) != "expired" {
			return out, err
		}
	}
	return nil, fmt.Errorf("10 lists in a row expired")
}

func listPages(ctx context.Context, cms corev1client.ConfigMapInterface, st *stats) (map[string]*corev1.ConfigMap, error) {
	out := map[string]*corev1.ConfigMap{}
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		rctx, cancel := guard(ctx)
		start := time.Now()
		page, err := cms.List(rctx, opts)
		cancel()
		st.add("list", time.Since(start))
		st.count("list", outcome(err))
		if err != nil {
			return nil, err
		}
		for i := range page.Items {
			cm := &page.Items[i]
			if out[cm.Name] != nil {
				return nil, fmt.Errorf("%s on two pages of one list", cm.Name)
			}
			out[cm.Name] = cm
		}
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
}
