package core

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	"k8s.io/apiserver/pkg/registry/rest"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	netutils "k8s.io/utils/net"
)

var (
	_ rest.Connecter = (*logREST)(nil)
	_ rest.Connecter = (*execREST)(nil)
	_ rest.Connecter = (*attachREST)(nil)
	_ rest.Connecter = (*portForwardREST)(nil)
	_ rest.Connecter = (*proxyREST)(nil)
)

// logREST is pods/log: a GET (authorized as get pods/log, as
// kube-apiserver's GetterWithOptions) whose body streams the container's
// log from its kubelet.
type logREST struct{ *podConnect }

func (*logREST) New() runtime.Object                               { return &corev1.Pod{} }
func (*logREST) Destroy()                                          {}
func (*logREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, false, "" }
func (*logREST) ConnectMethods() []string                          { return []string{http.MethodGet} }

// Connect implements rest.Connecter.
func (r *logREST) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	return connectHandler(decodeLogOptions, responder, func(opts *corev1.PodLogOptions) (http.Handler, error) {
		if errs := validateLogOptions(opts); len(errs) > 0 {
			return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, name, errs)
		}
		loc, err := r.logLocation(ctx, name, opts)
		if err != nil {
			return nil, err
		}
		streamer := &genericrest.LocationStreamer{Location: loc, Transport: r.transport, ContentType: "text/plain", Flush: opts.Follow,
			ResponseChecker: genericrest.NewGenericHttpResponseChecker(corev1.Resource("pods/log"), name),
			RedirectChecker: genericrest.PreventRedirects}
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			out, flush, contentType, err := streamer.InputStream(req.Context(), corev1.SchemeGroupVersion.String(), req.Header.Get("Accept"))
			if err != nil {
				responder.Error(err)
				return
			}
			opened := &openedStream{out: out, flush: flush, contentType: contentType}
			responsewriters.StreamObject(http.StatusOK, corev1.SchemeGroupVersion, nil, opened, w, req)
		}), nil
	}), nil
}

// logLocation is LogLocation: nil for a pod not scheduled yet (its log is
// empty, 204).
func (r *logREST) logLocation(ctx context.Context, name string, opts *corev1.PodLogOptions) (*url.URL, error) {
	pod, err := r.pod(ctx, name)
	if err != nil {
		return nil, err
	}
	container, err := validateContainer(opts.Container, pod)
	if err != nil || pod.Spec.NodeName == "" {
		return nil, err
	}
	q := url.Values{}
	add := func(set bool, key, value string) {
		if set {
			q.Add(key, value)
		}
	}
	add(opts.Follow, "follow", "true")
	add(opts.Previous, "previous", "true")
	add(opts.Timestamps, "timestamps", "true")
	for key, v := range map[string]*int64{"sinceSeconds": opts.SinceSeconds, "tailLines": opts.TailLines, "limitBytes": opts.LimitBytes} {
		if v != nil {
			q.Add(key, strconv.FormatInt(*v, 10))
		}
	}
	if opts.SinceTime != nil { // whole seconds, as kube-apiserver sends it
		q.Add("sinceTime", opts.SinceTime.Format(time.RFC3339))
	}
	loc, _, err := r.kubeletLocation(ctx, pod, fmt.Sprintf("/containerLogs/%s/%s/%s", pod.Namespace, pod.Name, container), q)
	return loc, err
}

// openedStream is a ResourceStreamer of a stream already opened, so that
// opening errors are answered as the API's Status first.
type openedStream struct {
	out         io.ReadCloser
	flush       bool
	contentType string
}

func (s *openedStream) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (s *openedStream) DeepCopyObject() runtime.Object   { return s }

func (s *openedStream) InputStream(context.Context, string, string) (io.ReadCloser, bool, string, error) {
	return s.out, s.flush, s.contentType, nil
}

// execREST is pods/exec.
type execREST struct{ *podConnect }

func (*execREST) New() runtime.Object                               { return &corev1.PodExecOptions{} }
func (*execREST) Destroy()                                          {}
func (*execREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, false, "" }
func (*execREST) ConnectMethods() []string                          { return upgradeableMethods }

// Connect implements rest.Connecter.
func (r *execREST) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	return connectHandler(decodeExecOptions, responder, func(o *corev1.PodExecOptions) (http.Handler, error) {
		q := streamQuery(o.Stdin, o.Stdout, o.Stderr, o.TTY)
		for _, c := range o.Command {
			q.Add(corev1.ExecCommandParam, c)
		}
		return r.remoteCommand(ctx, name, "exec", o.Container, q,
			translator.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY}, responder)
	}), nil
}

// attachREST is pods/attach.
type attachREST struct{ *podConnect }

func (*attachREST) New() runtime.Object                               { return &corev1.PodAttachOptions{} }
func (*attachREST) Destroy()                                          {}
func (*attachREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, false, "" }
func (*attachREST) ConnectMethods() []string                          { return upgradeableMethods }

// Connect implements rest.Connecter.
func (r *attachREST) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	return connectHandler(decodeAttachOptions, responder, func(o *corev1.PodAttachOptions) (http.Handler, error) {
		return r.remoteCommand(ctx, name, "attach", o.Container, streamQuery(o.Stdin, o.Stdout, o.Stderr, o.TTY),
			translator.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY}, responder)
	}), nil
}

// streamQuery is the kubelet's query for the streams asked for: only
// those set, as "1".
func streamQuery(stdin, stdout, stderr, tty bool) url.Values {
	q := url.Values{}
	for key, set := range map[string]bool{corev1.ExecStdinParam: stdin, corev1.ExecStdoutParam: stdout,
		corev1.ExecStderrParam: stderr, corev1.ExecTTYParam: tty} {
		if set {
			q.Add(key, "1")
		}
	}
	return q
}

// portForwardREST is pods/portforward: any pod's port, no container.
type portForwardREST struct{ *podConnect }

func (*portForwardREST) New() runtime.Object                               { return &corev1.PodPortForwardOptions{} }
func (*portForwardREST) Destroy()                                          {}
func (*portForwardREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, false, "" }
func (*portForwardREST) ConnectMethods() []string                          { return upgradeableMethods }

// Connect implements rest.Connecter: a WebSocket client tunnels SPDY
// (SPDY/3.1+portforward.k8s.io), unwrapped here unless the kubelet does it.
func (r *portForwardREST) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	return connectHandler(decodePortForwardOptions, responder, func(o *corev1.PodPortForwardOptions) (http.Handler, error) {
		if err := r.authorizeCreate(ctx); err != nil {
			return nil, err
		}
		pod, err := r.pod(ctx, name)
		if err != nil {
			return nil, err
		}
		q := url.Values{}
		if len(o.Ports) > 0 {
			ports := make([]string, len(o.Ports))
			for i, p := range o.Ports {
				ports[i] = strconv.FormatInt(int64(p), 10)
			}
			q.Add(corev1.PortHeader, strings.Join(ports, ","))
		}
		loc, conn, err := r.kubeletLocation(ctx, pod, fmt.Sprintf("/portForward/%s/%s", pod.Namespace, pod.Name), q)
		if err != nil {
			return nil, err
		}
		handler := r.upgradeProxy(loc, responder)
		if conn.websockets {
			return handler, nil
		}
		return translator.NewTranslatingHandler(handler, translator.NewTunnelingHandler(handler), wsstream.IsWebSocketRequestWithTunnelingProtocol), nil
	}), nil
}

// proxyREST is pods/proxy and pods/proxy/{path}: HTTP (and upgrades) to
// the pod's IP, name being "pod", "pod:port" or "scheme:pod:port".
type proxyREST struct{ *podConnect }

func (*proxyREST) New() runtime.Object                               { return &corev1.PodProxyOptions{} }
func (*proxyREST) Destroy()                                          {}
func (*proxyREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, true, "path" }
func (*proxyREST) ConnectMethods() []string                          { return proxyMethods }

// Connect implements rest.Connecter.
func (r *proxyREST) Connect(ctx context.Context, id string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	loc, err := r.resourceLocation(ctx, id)
	if err != nil {
		return nil, err
	}
	return proxyTo(ctx, loc, r.transport, responder), nil
}

// resourceLocation is pod.ResourceLocation: the pod's IP, at the port
// asked for or the first one its containers declare.
func (r *proxyREST) resourceLocation(ctx context.Context, id string) (*url.URL, error) {
	scheme, name, port, valid := utilnet.SplitSchemeNamePort(id)
	if !valid {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid pod request %q", id))
	}
	pod, err := r.pod(ctx, name)
	if err != nil {
		return nil, err
	}
	for i := 0; port == "" && i < len(pod.Spec.Containers); i++ {
		if ports := pod.Spec.Containers[i].Ports; len(ports) > 0 {
			port = strconv.Itoa(int(ports[0].ContainerPort))
		}
	}
	podIP := ""
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	if ip := netutils.ParseIPSloppy(podIP); ip == nil || !ip.IsGlobalUnicast() {
		return nil, apierrors.NewBadRequest("address not allowed")
	}
	loc := &url.URL{Scheme: scheme, Host: podIP}
	if strings.Contains(podIP, ":") {
		loc.Host = "[" + podIP + "]"
	}
	if port != "" {
		loc.Host = net.JoinHostPort(podIP, port)
	}
	return loc, nil
}

// subpath is the request's path after .../proxy, with a leading slash and
// its trailing one kept, as the generic handlers give it to a connecter.
func subpath(ctx context.Context) string {
	info, ok := genericapirequest.RequestInfoFrom(ctx)
	if !ok || len(info.Parts) < 3 {
		return ""
	}
	p := strings.Join(info.Parts[3:], "/")
	if p != "" && !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if strings.HasSuffix(info.Path, "/") && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}
