package apiserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The tests of the Tables of core kinds, nodes, services, events, volumes,
// claims, endpoints and endpoint slices: each input takes a branch of
// kube-apiserver v1.37.2's printer (pkg/printers/internalversion) and the
// cells are what that printer gives for it.

// columnByName is column's cell of each row of path's Table, by the
// row's NAME.
func columnByName(t *testing.T, c kubernetes.Interface, path, column string) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, row := range tableCells(t, c, path) {
		name, ok := row["Name"].(string)
		require.True(t, ok, "a row of %s has no NAME: %v", path, row)
		out[name] = row[column]
	}
	return out
}

// printersNamespace creates the namespace "printers" for objects of the
// test alone (default holds the kubernetes service's endpoints).
func printersNamespace(t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "printers"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return "printers"
}

func TestPrintersCoreNode(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{
			"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "master",
		}}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KernelVersion: "6.1.0", Architecture: "arm64"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"kubernetes.io/role": "", "kubernetes.io/os": "linux"}},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"kubernetes.io/role": "worker", "node-role.kubernetes.io/worker": ""}},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KernelVersion: "5.15.0"}}},
	} {
		_, err := c.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	assert.Equal(t, map[string]any{"a": "control-plane,master,worker", "b": "<none>", "c": "worker"},
		columnByName(t, c, "/api/v1/nodes", "Roles"))
	assert.Equal(t, map[string]any{"a": "6.1.0 (arm64)", "b": "<unknown> (amd64)", "c": "5.15.0"},
		columnByName(t, c, "/api/v1/nodes", "Kernel-Version"))
}

func TestPrintersCoreService(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	ctx := t.Context()
	ns := printersNamespace(t, c)
	svc := func(name string, typ corev1.ServiceType, externalIPs ...string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
			Type: typ, ExternalIPs: externalIPs, Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	ingress := map[string][]corev1.LoadBalancerIngress{
		"lb-hostname": {{Hostname: "lb.example.com"}},
		"lb-many":     {{IP: "192.0.2.5"}, {Hostname: "b.example.com"}, {IP: "192.0.2.1"}, {IP: "192.0.2.5"}},
	}
	for _, s := range []*corev1.Service{
		svc("cluster-ip", corev1.ServiceTypeClusterIP, "198.51.100.1", "198.51.100.2"),
		svc("cluster-ip-none", corev1.ServiceTypeClusterIP),
		svc("node-port", corev1.ServiceTypeNodePort, "198.51.100.3"),
		svc("lb-hostname", corev1.ServiceTypeLoadBalancer),
		svc("lb-many", corev1.ServiceTypeLoadBalancer, "198.51.100.9"),
		svc("lb-pending", corev1.ServiceTypeLoadBalancer),
		svc("lb-external-ips", corev1.ServiceTypeLoadBalancer, "198.51.100.4"),
		{ObjectMeta: metav1.ObjectMeta{Name: "external-name"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}},
	} {
		created, err := c.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
		if in, ok := ingress[s.Name]; ok {
			created.Status.LoadBalancer.Ingress = in
			_, err = c.CoreV1().Services(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
	}
	assert.Equal(t, map[string]any{
		"cluster-ip": "198.51.100.1,198.51.100.2", "cluster-ip-none": "<none>", "node-port": "198.51.100.3",
		"lb-hostname": "lb.example.com", "lb-many": "192.0.2.1,192.0.2.5,b.example.com,198.51.100.9",
		"lb-pending": "<pending>", "lb-external-ips": "198.51.100.4", "external-name": "db.example.com",
	}, columnByName(t, c, "/api/v1/namespaces/"+ns+"/services", "External-IP"))
}

func TestPrintersCoreEvent(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	ctx := t.Context()
	// Ages print the same for half an hour either way ("20h", "12h", "10d").
	ago := func(d time.Duration) time.Time { return time.Now().Add(-d) }
	for _, e := range []*corev1.Event{
		{ObjectMeta: metav1.ObjectMeta{Name: "kubelet"}, Type: corev1.EventTypeNormal, Reason: "Pulled", Message: "  pulled image\n",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p", FieldPath: "spec.containers{app}"},
			Source:         corev1.EventSource{Component: "kubelet", Host: "node1"}, Count: 3,
			FirstTimestamp: metav1.NewTime(ago(20*time.Hour + 30*time.Minute)), LastTimestamp: metav1.NewTime(ago(12*time.Hour + 30*time.Minute))},
		{ObjectMeta: metav1.ObjectMeta{Name: "controller"}, Type: corev1.EventTypeWarning, Reason: "Failed",
			InvolvedObject: corev1.ObjectReference{Kind: "Node"}, ReportingController: "example.com/ctrl",
			FirstTimestamp: metav1.NewTime(ago(20*time.Hour + 30*time.Minute))},
		{ObjectMeta: metav1.ObjectMeta{Name: "event-time"}, Type: corev1.EventTypeNormal, Reason: "Synced", Action: "Sync",
			InvolvedObject:      corev1.ObjectReference{Kind: "ConfigMap", Namespace: "default", Name: "cm"},
			ReportingController: "ctrl", ReportingInstance: "ctrl-1",
			FirstTimestamp: metav1.NewTime(ago(20*time.Hour + 30*time.Minute)), EventTime: metav1.NewMicroTime(ago(12*time.Hour + 30*time.Minute))},
		{ObjectMeta: metav1.ObjectMeta{Name: "series"}, Type: corev1.EventTypeNormal, Reason: "BackOff",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"}, Source: corev1.EventSource{Component: "kubelet"},
			FirstTimestamp: metav1.NewTime(ago(240 * time.Hour)), LastTimestamp: metav1.NewTime(ago(20*time.Hour + 30*time.Minute)),
			Series: &corev1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(ago(12*time.Hour + 30*time.Minute))}},
	} {
		_, err := c.CoreV1().Events("default").Create(ctx, e, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := c.EventsV1().Events("default").Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "new-style"},
		EventTime: metav1.NewMicroTime(ago(20*time.Hour + 30*time.Minute)), Series: &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(ago(12*time.Hour + 30*time.Minute))},
		ReportingController: "example.com/ctrl", ReportingInstance: "ctrl-0", Action: "Scale", Reason: "Scaled", Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{Kind: "Deployment", Namespace: "default", Name: "d"}, Note: "scaled \n"}, metav1.CreateOptions{})
	require.NoError(t, err)

	rows := tableCells(t, c, "/api/v1/namespaces/default/events")
	assert.Equal(t, rows, tableCells(t, c, "/apis/events.k8s.io/v1/namespaces/default/events"), "the events.k8s.io Table")
	byName := map[string][]any{}
	for _, r := range rows {
		byName[r["Name"].(string)] = []any{r["Last Seen"], r["Object"], r["Source"], r["Message"], r["First Seen"], r["Count"]}
	}
	assert.Equal(t, map[string][]any{
		"kubelet":    {"12h", "pod/p", "kubelet, node1", "pulled image", "20h", 3.0},
		"controller": {"20h", "node", "example.com/ctrl", "", "20h", 1.0},
		"event-time": {"20h", "configmap/cm", "ctrl, ctrl-1", "", "20h", 1.0},
		"series":     {"12h", "pod/p", "kubelet", "", "10d", 4.0},
		"new-style":  {"12h", "deployment/d", "example.com/ctrl, ctrl-0", "scaled", "20h", 2.0},
	}, byName)
}

func TestPrintersCorePersistentVolume(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	ctx := t.Context()
	class := map[string]string{corev1.BetaStorageClassAnnotation: "gold"}
	for _, pv := range []*corev1.PersistentVolume{
		{ObjectMeta: metav1.ObjectMeta{Name: "annotated", Annotations: class}, Spec: corev1.PersistentVolumeSpec{
			StorageClassName: "silver", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteMany}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "deleted"}, Spec: corev1.PersistentVolumeSpec{
			StorageClassName: "silver", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteOnce}}},
	} {
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
		pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/tmp/" + pv.Name}
		_, err := c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// The pv-protection finalizer keeps it, being deleted.
	require.NoError(t, c.CoreV1().PersistentVolumes().Delete(ctx, "deleted", metav1.DeleteOptions{}))

	byName := map[string][]any{}
	for _, r := range tableCells(t, c, "/api/v1/persistentvolumes") {
		byName[r["Name"].(string)] = []any{r["Status"], r["Access Modes"], r["StorageClass"]}
	}
	assert.Equal(t, map[string][]any{
		"annotated": {"Pending", "RWO,RWX", "gold"},
		"deleted":   {"Terminating", "RWO,ROX", "silver"},
	}, byName)
}

func TestPrintersCorePersistentVolumeClaim(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	ctx := t.Context()
	ns := printersNamespace(t, c)
	claims := c.CoreV1().PersistentVolumeClaims(ns)
	pvc := func(name, volume string, class *string, annotations map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Spec: corev1.PersistentVolumeClaimSpec{
			VolumeName: volume, StorageClassName: class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	}
	status := corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce},
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}}
	for _, claim := range []*corev1.PersistentVolumeClaim{
		pvc("bound", "pv-a", nil, map[string]string{corev1.BetaStorageClassAnnotation: "gold"}),
		pvc("no-volume", "", ptr("silver"), nil),
		pvc("no-capacity", "pv-b", nil, nil),
	} {
		created, err := claims.Create(ctx, claim, metav1.CreateOptions{})
		require.NoError(t, err)
		if claim.Name != "no-capacity" {
			created.Status = status
			_, err = claims.UpdateStatus(ctx, created, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
	}
	// The pvc-protection finalizer keeps it, being deleted.
	require.NoError(t, claims.Delete(ctx, "no-capacity", metav1.DeleteOptions{}))

	byName := map[string][]any{}
	for _, r := range tableCells(t, c, "/api/v1/namespaces/"+ns+"/persistentvolumeclaims") {
		byName[r["Name"].(string)] = []any{r["Status"], r["Volume"], r["Capacity"], r["Access Modes"], r["StorageClass"]}
	}
	assert.Equal(t, map[string][]any{
		"bound":       {"Bound", "pv-a", "5Gi", "RWO,RWX", "gold"},
		"no-volume":   {"Bound", "", "", "", "silver"},
		"no-capacity": {"Terminating", "pv-b", "0", "", ""},
	}, byName)
}

func TestPrintersCoreEndpoints(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	ns := printersNamespace(t, c)
	addrs := func(ips ...string) []corev1.EndpointAddress {
		var out []corev1.EndpointAddress
		for _, ip := range ips {
			out = append(out, corev1.EndpointAddress{IP: ip})
		}
		return out
	}
	ports := []corev1.EndpointPort{{Name: "a", Port: 80}, {Name: "b", Port: 81}}
	for _, e := range []*corev1.Endpoints{
		{ObjectMeta: metav1.ObjectMeta{Name: "no-subsets"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "not-ready"}, Subsets: []corev1.EndpointSubset{{NotReadyAddresses: addrs("10.1.0.1"), Ports: ports}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ipv6"}, Subsets: []corev1.EndpointSubset{{Addresses: addrs("2001:db8::1"), Ports: ports[:1]}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ports-first"}, Subsets: []corev1.EndpointSubset{{Addresses: addrs("10.1.0.1", "10.1.0.2"), Ports: ports}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "headless"}, Subsets: []corev1.EndpointSubset{
			{Addresses: addrs("10.1.0.1")}, {Addresses: addrs("10.1.0.2"), Ports: ports[:1]}}},
	} {
		_, err := c.CoreV1().Endpoints(ns).Create(t.Context(), e, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	got := columnByName(t, c, "/api/v1/namespaces/"+ns+"/endpoints", "Endpoints")
	assert.Equal(t, map[string]any{
		"no-subsets": "<none>", "not-ready": "", "ipv6": "[2001:db8::1]:80",
		"ports-first": "10.1.0.1:80,10.1.0.2:80,10.1.0.1:81 + 1 more...", "headless": "10.1.0.1,10.1.0.2:80",
	}, got)
}

func TestPrintersCoreEndpointSlice(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	ns := printersNamespace(t, c)
	port := func(name string, number *int32) discoveryv1.EndpointPort {
		return discoveryv1.EndpointPort{Name: ptr(name), Port: number}
	}
	var endpoints []discoveryv1.Endpoint
	for _, ip := range []string{"10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4", "10.1.0.5"} {
		endpoints = append(endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	for _, s := range []*discoveryv1.EndpointSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: "many"}, Endpoints: endpoints, Ports: []discoveryv1.EndpointPort{
			port("a", ptr[int32](80)), port("http", nil), port("b", ptr[int32](81)), port("c", ptr[int32](82))}},
		{ObjectMeta: metav1.ObjectMeta{Name: "three"}, Endpoints: endpoints[:3], Ports: []discoveryv1.EndpointPort{
			port("a", ptr[int32](80)), port("b", ptr[int32](81)), port("c", ptr[int32](82))}},
		// Defaulting names the port "": it prints nothing, so <unset>.
		{ObjectMeta: metav1.ObjectMeta{Name: "unnamed"}, Ports: []discoveryv1.EndpointPort{{}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "empty"}},
	} {
		s.AddressType = discoveryv1.AddressTypeIPv4
		_, err := c.DiscoveryV1().EndpointSlices(ns).Create(t.Context(), s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	path := "/apis/discovery.k8s.io/v1/namespaces/" + ns + "/endpointslices"
	assert.Equal(t, map[string]any{"many": "80,http,81 + 1 more...", "three": "80,81,82", "unnamed": "<unset>", "empty": "<unset>"},
		columnByName(t, c, path, "Ports"))
	assert.Equal(t, map[string]any{
		"many": "10.1.0.1,10.1.0.2,10.1.0.3 + 2 more...", "three": "10.1.0.1,10.1.0.2,10.1.0.3", "unnamed": "<unset>", "empty": "<unset>",
	}, columnByName(t, c, path, "Endpoints"))
}
