package kubelet

// pods/portforward as the kubelet serves it (getPortForward), then the CRI
// streaming server's ServePortForward, connecting each forwarded
// connection to what the test serves on the pod's port, as containerd
// connects to localhost:port in the pod's network namespace.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// servePortForward is /portForward/{namespace}/{pod}[/{uid}].
func (k *Kubelet) servePortForward(w http.ResponseWriter, req *http.Request) {
	tunnel := wsstream.IsWebSocketRequestWithTunnelingProtocol(req)
	opts := &portforward.V4Options{}
	if !tunnel {
		var err error
		if opts, err = portforward.NewV4Options(req); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	pod, ok := k.nodePod(req.Context(), req.PathValue("namespace"), req.PathValue("pod"))
	if !ok {
		writeError(w, http.StatusNotFound, "pod does not exist")
		return
	}
	if uid := req.PathValue("uid"); uid != "" && types.UID(uid) != pod.UID {
		writeError(w, http.StatusNotFound, "pod not found")
		return
	}
	if !k.sandboxRuns(pod) {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("pod not found (%q)", podFullName(pod)))
		return
	}
	if tunnel {
		// SPDY in WebSocket messages, to the kubelet itself.
		up := proxy.NewUpgradeAwareHandler(selfURL(req), k.nodeTransport(nodeOf(req.Context())), false, true, kubeletResponder{})
		translator.NewTunnelingHandler(up).ServeHTTP(w, req)
		return
	}
	// The runtime names the pod by its sandbox, with no UID.
	f := &forwarder{k: k, pod: pod.Namespace + "/" + pod.Name, uid: pod.UID}
	portforward.ServePortForward(w, req, f, sandboxID(pod.UID), "", opts, streamIdleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
}

// sandboxRuns: the runtime runs the pod's sandbox (its network).
func (k *Kubelet) sandboxRuns(pod *corev1.Pod) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	r := k.running[pod.UID]
	return r != nil && r.sandbox && !r.deleted
}

// sandboxID is the pod's sandbox as containerd names it: 64 hex digits
// (derived from the pod's UID here, so stable).
func sandboxID(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return hex.EncodeToString(sum[:])
}

// forwarder is the pod's PortForwarder.
type forwarder struct {
	k   *Kubelet
	pod string
	uid types.UID
}

// PortForward copies between the client's stream and the pod's port until
// the port's side is done; the client's end of input reaches it as a TCP
// half-close.
func (f *forwarder) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	conn := f.k.streams.dialPort(f.pod, port)
	if conn == nil {
		id := sandboxID(f.uid)
		netns := "/var/run/netns/cni-" + uuid.NewSHA1(uuid.NameSpaceOID, []byte(f.uid)).String()
		return fmt.Errorf("failed to execute portforward in network namespace %q: failed to connect to localhost:%d inside namespace %q, "+
			"IPv4: dial tcp4 127.0.0.1:%d: connect: connection refused IPv6 dial tcp6 [::1]:%d: connect: connection refused ",
			netns, port, id, port, port)
	}
	defer conn.Close()
	go func() {
		_, _ = io.Copy(conn, stream)
		if hc, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = hc.CloseWrite()
		}
	}()
	// Once the port's side is done, so is the forwarding: how it ended is
	// no error of the pod's.
	_, _ = io.Copy(stream, conn)
	return nil
}
