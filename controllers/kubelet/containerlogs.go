package kubelet

// /containerLogs as the kubelet serves it: getContainerLogs, then
// GetKubeletContainerLogs's validateContainerLogStatus over the status the
// kubelet reports for the pod, then the runtime's log.

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/util/flushwriter"
)

// serveContainerLogs is /containerLogs/{namespace}/{pod}/{container}.
func (k *Kubelet) serveContainerLogs(w http.ResponseWriter, req *http.Request) {
	name, container := req.PathValue("pod"), req.PathValue("container")
	query := req.URL.Query()
	if tail := query.Get("tail"); tail != "" { // the legacy name of tailLines
		query["tailLines"] = []string{tail}
		if tail == "all" {
			delete(query, "tailLines")
		}
	}
	opts, err := decodeLogOptions(query)
	if err != nil {
		writeError(w, http.StatusBadRequest, `{"message": "Unable to decode query."}`)
		return
	}
	if !validLogOptions(opts) {
		writeError(w, http.StatusUnprocessableEntity, `{"message": "Invalid request."}`)
		return
	}
	pod, ok := k.nodePod(req.Context(), req.PathValue("namespace"), name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("pod %q does not exist", name))
		return
	}
	if containerSpec(pod, container) == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("container %q not found in pod %q", container, name))
		return
	}
	if opts.Stream != nil && *opts.Stream != corev1.LogStreamAll { // PodLogsQuerySplitStreams is off in v1.37
		writeError(w, http.StatusBadRequest, fmt.Sprintf("unable to return the given log stream: %q. Please enable PodLogsQuerySplitStreams feature gate in kubelet", *opts.Stream))
		return
	}
	id, err := k.logContainerID(pod, container, opts.Previous)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// A zero-byte write first, as the kubelet's: the headers go out before
	// a follow waits for lines.
	fw := flushwriter.Wrap(w)
	if _, err := fw.Write(nil); err != nil {
		return
	}
	_ = k.writeLogs(req.Context(), k.logOf(pod.Namespace+"/"+pod.Name, container, id), opts, fw)
}

// logContainerID is validateContainerLogStatus: the ID of the container
// instance whose log to read, or why there is none.
func (k *Kubelet) logContainerID(pod *corev1.Pod, name string, previous bool) (string, error) {
	s, found := k.containerStatus(pod, name)
	if !found {
		return "", fmt.Errorf("container %q in pod %q is not available", name, pod.Name)
	}
	last, waiting, running, terminated := s.LastTerminationState.Terminated, s.State.Waiting, s.State.Running, s.State.Terminated
	var id string
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", name, pod.Name)
		}
		id = last.ContainerID
	case running != nil:
		id = s.ContainerID
	case terminated != nil && terminated.ContainerID != "":
		id = terminated.ContainerID
	case terminated != nil && last != nil && last.ContainerID != "":
		id = last.ContainerID
	case terminated != nil:
		return "", fmt.Errorf("container %q in pod %q is terminated", name, pod.Name)
	case last != nil:
		if last.ContainerID == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", name, pod.Name)
		}
		id = last.ContainerID
	case waiting != nil:
		return "", fmt.Errorf("container %q in pod %q is waiting to start: %v", name, pod.Name, waitingReason(waiting.Reason))
	default:
		return "", fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", name, pod.Name)
	}
	_, id, _ = strings.Cut(id, "://")
	return id, nil
}

// waitingReason is how the kubelet words the common reasons a container
// waits.
func waitingReason(reason string) string {
	switch reason {
	case "ErrImagePull":
		return "image can't be pulled"
	case "ImagePullBackOff":
		return "trying and failing to pull image"
	}
	return reason
}

// containerStatus is the container's status as the kubelet reports it
// now: from the runtime when it runs the pod; otherwise the pod's status,
// or, for a container it has none of yet (the pod was just admitted, or
// the node's runtime is down), waiting to be created.
func (k *Kubelet) containerStatus(pod *corev1.Pod, name string) (corev1.ContainerStatus, bool) {
	k.mu.Lock()
	now := k.clock.Now()
	var init, main, ephemeral []corev1.ContainerStatus
	r := k.running[pod.UID]
	if r != nil {
		init, main, ephemeral = containerStatuses(pod, r, now)
	}
	k.mu.Unlock()
	if r != nil && r.rejection != nil {
		return corev1.ContainerStatus{}, false // rejected: it has no container, none is to come
	}
	if init == nil && main == nil {
		init, main, ephemeral = pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses
		if !hasStatus(init, name) && !hasStatus(main, name) && !hasStatus(ephemeral, name) {
			r := newRuntime(pod, pod.Spec.NodeName, "", now)
			r.addEphemeral(pod)
			init, main, ephemeral = containerStatuses(pod, r, now)
		}
	}
	for _, list := range [][]corev1.ContainerStatus{main, init, ephemeral} {
		for _, s := range list {
			if s.Name == name {
				return s, true
			}
		}
	}
	return corev1.ContainerStatus{}, false
}

func hasStatus(list []corev1.ContainerStatus, name string) bool {
	for _, s := range list {
		if s.Name == name {
			return true
		}
	}
	return false
}

// decodeLogOptions reads PodLogOptions from a query, as the generated
// url.Values conversion of k8s.io/kubernetes does.
func decodeLogOptions(query url.Values) (*corev1.PodLogOptions, error) {
	opts := &corev1.PodLogOptions{Container: query.Get("container")}
	for name, into := range map[string]*bool{"follow": &opts.Follow, "previous": &opts.Previous, "timestamps": &opts.Timestamps,
		"insecureSkipTLSVerifyBackend": &opts.InsecureSkipTLSVerifyBackend} {
		if v, ok := query[name]; ok && len(v) > 0 {
			if err := runtime.Convert_Slice_string_To_bool(&v, into, nil); err != nil {
				return nil, err
			}
		}
	}
	for name, into := range map[string]**int64{"sinceSeconds": &opts.SinceSeconds, "tailLines": &opts.TailLines, "limitBytes": &opts.LimitBytes} {
		if v, ok := query[name]; ok && len(v) > 0 {
			if err := runtime.Convert_Slice_string_To_Pointer_int64(&v, into, nil); err != nil {
				return nil, err
			}
		}
	}
	if v, ok := query["sinceTime"]; ok && len(v) > 0 {
		if err := metav1.Convert_Slice_string_To_Pointer_v1_Time(&v, &opts.SinceTime, nil); err != nil {
			return nil, err
		}
	}
	if v, ok := query["stream"]; ok && len(v) > 0 {
		stream := v[0]
		opts.Stream = &stream
	}
	return opts, nil
}

// validLogOptions is ValidatePodLogOptions (the API server reports which
// rule failed; the kubelet only that one did).
func validLogOptions(o *corev1.PodLogOptions) bool {
	return (o.TailLines == nil || *o.TailLines >= 0) && (o.LimitBytes == nil || *o.LimitBytes >= 1) &&
		(o.SinceSeconds == nil || o.SinceTime == nil) && (o.SinceSeconds == nil || *o.SinceSeconds >= 1)
}
