package kubelet

// What the kubelet serves beside the API, by pod: its containers' logs,
// and what the test says runs in them: the processes an exec or attach
// reaches, and what listens on the pod's ports.

import (
	"net"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// streams are the containers' logs and the test's handlers, by pod
// (namespace/name): they outlive a pod of that name, as a test registers
// them before its pods run.
type streams struct {
	mu sync.Mutex
	// logs are by namespace/pod/container.
	logs map[string]*containerLogs
	// exec and attach are by namespace/pod/container; container "" is
	// every container of the pod.
	exec   map[string]ExecHandler
	attach map[string]AttachHandler
	// ports are by namespace/pod, then port.
	ports map[string]map[int32]portHandler
	// changed are closed (and forgotten) when the pod changes: a
	// container followed may have ended.
	changed map[string]chan struct{}
}

// portHandler is what listens on a pod's port: a raw connection's
// handler, or an HTTP server's.
type portHandler struct {
	conn func(net.Conn)
	http http.Handler
}

func newStreams() *streams {
	return &streams{logs: map[string]*containerLogs{}, exec: map[string]ExecHandler{}, attach: map[string]AttachHandler{},
		ports: map[string]map[int32]portHandler{}, changed: map[string]chan struct{}{}}
}

// reset drops the logs and handlers of every pod (Kubelet.Reset); the
// followers of a pod end as when it changes.
func (s *streams) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.changed {
		close(ch)
	}
	fresh := newStreams()
	s.logs, s.exec, s.attach, s.ports, s.changed = fresh.logs, fresh.exec, fresh.attach, fresh.ports, fresh.changed
}

// podEvents tells followers of a pod's containers that it changed (the
// runtime changed before the kubelet wrote the pod's status).
func (s *streams) podEvents() cache.ResourceEventHandler {
	changed := func(obj any) {
		if p, ok := deleted(obj).(*corev1.Pod); ok {
			s.podChanged(p.Namespace + "/" + p.Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, o any) { changed(o) }, DeleteFunc: changed}
}

func (s *streams) podChanged(pod string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.changed[pod]; ok {
		close(ch)
		delete(s.changed, pod)
	}
}

// podSignal is closed at the pod's next change. Take it before looking
// at the pod, so that no change is missed.
func (s *streams) podSignal(pod string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.changed[pod]
	if !ok {
		ch = make(chan struct{})
		s.changed[pod] = ch
	}
	return ch
}

// HandlePort makes h serve the connections to the pod's port: those
// kubectl port-forward opens through the kubelet, and pods/proxy's and
// an httpGet lifecycle hook's (h then reads an HTTP request). It replaces what served the port, for the
// pods of that name from now on. Without one, the port refuses
// connections, as a port nothing listens on.
func (k *Kubelet) HandlePort(namespace, pod string, port int32, h func(net.Conn)) {
	k.streams.setPort(namespace+"/"+pod, port, portHandler{conn: h})
}

// HandleProxy makes h the HTTP server on the pod's port: what pods/proxy
// (and a port-forward, and an httpGet lifecycle hook) reach there. It
// replaces what served the port, as HandlePort does.
func (k *Kubelet) HandleProxy(namespace, pod string, port int32, h http.Handler) {
	k.streams.setPort(namespace+"/"+pod, port, portHandler{http: h})
}

func (s *streams) setPort(pod string, port int32, h portHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ports[pod] == nil {
		s.ports[pod] = map[int32]portHandler{}
	}
	s.ports[pod][port] = h
}

// serves: something listens on the pod's port.
func (s *streams) serves(pod string, port int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ports[pod][port]
	return ok
}

// dialPort connects to the pod's port; nil when nothing listens there.
func (s *streams) dialPort(pod string, port int32) net.Conn {
	s.mu.Lock()
	h, ok := s.ports[pod][port]
	s.mu.Unlock()
	switch {
	case !ok:
		return nil
	case h.http != nil:
		return serveHTTP(&http.Server{Handler: h.http, ConnContext: trackConn}, "")
	}
	client, server := halfPipe()
	go func() {
		defer server.Close()
		h.conn(server)
	}()
	return client
}

// handler returns the handler of the pod's container in m, or the pod's
// for every container.
func handler[H any](s *streams, m map[string]H, pod, container string) (H, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := m[pod+"/"+container]; ok {
		return h, true
	}
	h, ok := m[pod+"/"]
	return h, ok
}
