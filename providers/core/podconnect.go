package core

// pods/log, exec, attach, portforward and proxy, as kube-apiserver's
// LogREST, ExecREST, AttachREST, PortForwardREST and ProxyREST serve them
// (pkg/registry/core/pod/rest, pod/strategy.go): the options from the
// query, the same checks and errors in the same order, then the request
// proxied to the pod's node's kubelet (or, for proxy, to the pod's IP)
// with the published proxies: apimachinery's UpgradeAwareHandler, and
// apiserver's StreamTranslatorHandler and TunnelingHandler for WebSocket
// clients when the node's kubelet does not translate them itself.
//
// They are Connecters whose options are read in the handler: the core
// group's parameter codec (metav1's) cannot decode these kinds, so
// NewConnectOptions returns none, and admission sees no options object on
// CONNECT (kube-apiserver gives it the decoded options).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// podConnect is what the pods' connect subresources share.
type podConnect struct {
	pods, nodes *registry.Store
	// transport reaches kubelets and pods (providers.Config ClusterDialer).
	transport *http.Transport
	authz     authorizer.Authorizer
}

// addPodConnect adds pods/log, exec, attach, portforward and proxy to s.
func addPodConnect(cfg providers.Config, pods *registry.Store, s map[string]rest.Storage) error {
	nodeStore, err := nodes.Store(cfg)
	if err != nil {
		return err
	}
	c := &podConnect{pods: pods, nodes: nodeStore, transport: clusterTransport(cfg.ClusterDialer), authz: cfg.Authorizer}
	s["pods/log"] = &logREST{c}
	s["pods/exec"] = &execREST{c}
	s["pods/attach"] = &attachREST{c}
	s["pods/portforward"] = &portForwardREST{c}
	s["pods/proxy"] = &proxyREST{c}
	return nil
}

// upgradeableMethods are exec's, attach's and portforward's: GET for
// WebSocket clients, POST for SPDY.
var upgradeableMethods = []string{http.MethodGet, http.MethodPost}

// connectHandler reads the request's options, then serves it as serve
// builds its handler; errors are the API's Status.
func connectHandler[O any](decode func(url.Values) (O, error), responder rest.Responder,
	serve func(O) (http.Handler, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		opts, err := decode(req.URL.Query())
		if err != nil {
			responder.Error(apierrors.NewBadRequest(err.Error()))
			return
		}
		h, err := serve(opts)
		if err != nil {
			responder.Error(err)
			return
		}
		h.ServeHTTP(w, req)
	})
}

// pod is the named pod of ctx's namespace.
func (c *podConnect) pod(ctx context.Context, name string) (*corev1.Pod, error) {
	obj, err := c.pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Pod), nil
}

// authorizeCreate is ensureAuthorizedForVerb (AuthorizePodWebsocketUpgradeCreatePermission,
// on in v1.37): a WebSocket client's GET must also be allowed to create
// the subresource, as a SPDY client's POST is.
func (c *podConnect) authorizeCreate(ctx context.Context) error {
	info, ok := genericapirequest.RequestInfoFrom(ctx)
	if !ok {
		return apierrors.NewInternalError(errors.New("no request info in context"))
	}
	if info.Verb == "create" {
		return nil
	}
	if c.authz == nil {
		return apierrors.NewInternalError(errors.New("no authorizer available"))
	}
	attrs, err := filters.GetAuthorizerAttributes(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("error building authorizer attributes: %w", err))
	}
	decision, reason, err := c.authz.Authorize(ctx, &overrideVerb{Attributes: attrs, verb: "create"})
	if err != nil {
		return err
	}
	if decision != authorizer.DecisionAllow {
		return apierrors.NewForbidden(schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}, info.Name, errors.New(reason))
	}
	return nil
}

type overrideVerb struct {
	authorizer.Attributes
	verb string
}

func (o *overrideVerb) GetVerb() string { return o.verb }

// validateContainer defaults the container of a pod with one, and checks
// that a named one is the pod's (init, regular or ephemeral).
func validateContainer(container string, pod *corev1.Pod) (string, error) {
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	switch {
	case container == "" && len(pod.Spec.Containers) == 1:
		return pod.Spec.Containers[0].Name, nil
	case container == "" && len(pod.Spec.Containers) == 0:
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
	case container == "":
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, names))
	}
	for _, n := range names {
		if n == container {
			return container, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", container, pod.Name))
}

// kubeletLocation is the URL of path (with query) at the kubelet of the
// pod's node; a pod not scheduled has none.
func (c *podConnect) kubeletLocation(ctx context.Context, pod *corev1.Pod, path string, query url.Values) (*url.URL, kubeletConn, error) {
	if pod.Spec.NodeName == "" {
		return nil, kubeletConn{}, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	conn, err := connection(ctx, c.nodes, pod.Spec.NodeName)
	if err != nil {
		return nil, kubeletConn{}, err
	}
	return &url.URL{Scheme: conn.scheme, Host: conn.host, Path: path, RawQuery: query.Encode()}, conn, nil
}

// upgradeProxy proxies upgrades (SPDY, or WebSocket through a kubelet that
// translates) to loc; any other request is a 400.
func (c *podConnect) upgradeProxy(loc *url.URL, responder rest.Responder) http.Handler {
	return proxy.NewUpgradeAwareHandler(loc, c.transport, false, true, proxy.NewErrorResponder(responder))
}

// remoteCommand serves exec or attach (kind) of the pod's container with
// the streams asked for: the kubelet translates a WebSocket client's
// streams to SPDY when its node declares it does; otherwise this server
// does.
func (c *podConnect) remoteCommand(ctx context.Context, name, kind, container string, query url.Values,
	streams translator.Options, responder rest.Responder) (http.Handler, error) {
	if err := c.authorizeCreate(ctx); err != nil {
		return nil, err
	}
	pod, err := c.pod(ctx, name)
	if err != nil {
		return nil, err
	}
	if container, err = validateContainer(container, pod); err != nil {
		return nil, err
	}
	loc, conn, err := c.kubeletLocation(ctx, pod, fmt.Sprintf("/%s/%s/%s/%s", kind, pod.Namespace, pod.Name, container), query)
	if err != nil {
		return nil, err
	}
	handler := c.upgradeProxy(loc, responder)
	if conn.websockets {
		return handler, nil
	}
	st := translator.NewStreamTranslatorHandler(loc, c.transport, 0, streams)
	return translator.NewTranslatingHandler(handler, st, wsstream.IsWebSocketRequestWithStreamCloseProtocol), nil
}
