package apiserver_test

import (
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func TestServices(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	svcs := clientset(t, srv).CoreV1().Services("default")
	ctx := t.Context()
	cidr := netip.MustParsePrefix("10.0.0.0/24")

	s, err := svcs.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ServiceTypeClusterIP, s.Spec.Type)
	assert.Equal(t, corev1.ServiceAffinityNone, s.Spec.SessionAffinity)
	assert.Equal(t, []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}}, s.Spec.Ports)
	assert.Equal(t, []corev1.IPFamily{corev1.IPv4Protocol}, s.Spec.IPFamilies)
	assert.Equal(t, corev1.IPFamilyPolicySingleStack, *s.Spec.IPFamilyPolicy)
	assert.Equal(t, corev1.ServiceInternalTrafficPolicyCluster, *s.Spec.InternalTrafficPolicy)
	ip, err := netip.ParseAddr(s.Spec.ClusterIP)
	require.NoError(t, err)
	// As kube-apiserver's allocator: from the upper part of the range
	// (past its first 16 addresses after the network's), the lower being
	// for Services that ask for their IP.
	assert.True(t, netip.MustParsePrefix("10.0.0.0/24").Contains(ip) && ip.Compare(netip.MustParseAddr("10.0.0.17")) >= 0,
		"%s in the upper part of %s", ip, cidr)
	assert.Equal(t, []string{s.Spec.ClusterIP}, s.Spec.ClusterIPs)

	// Updates keep the allocated IP; changing it is refused.
	s.Spec.Ports[0].Port = 8080
	s.Spec.Ports[0].TargetPort = intstr.FromInt32(8080)
	s, err = svcs.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, ip.String(), s.Spec.ClusterIP)
	s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.0.0.200", []string{"10.0.0.200"}
	_, err = svcs.Update(ctx, s, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "clusterIP change: %v", err)

	// A requested IP that is taken, or outside the range, is refused.
	_, err = svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dup"},
		Spec: corev1.ServiceSpec{ClusterIP: ip.String(), Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "taken IP: %v", err)
	_, err = svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "far"},
		Spec: corev1.ServiceSpec{ClusterIP: "192.168.1.1", Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "IP out of range: %v", err)
	for _, edge := range []string{"10.0.0.0", "10.0.0.255"} { // the network's, the broadcast
		_, err = svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "edge"},
			Spec: corev1.ServiceSpec{ClusterIP: edge, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
		require.True(t, apierrors.IsInvalid(err), "%s: %v", edge, err)
		assert.Contains(t, err.Error(), "failed to allocate IP "+edge+": the provided network does not match the current range")
	}

	// Deleting frees the IP.
	require.NoError(t, svcs.Delete(ctx, "web", metav1.DeleteOptions{}))
	_, err = svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "reuse"},
		Spec: corev1.ServiceSpec{ClusterIP: ip.String(), Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	np, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "np"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The upper part of the port range too: past kube-apiserver's offset
	// of 2768/32 = 86 ports.
	assert.GreaterOrEqual(t, np.Spec.Ports[0].NodePort, int32(30086))
	assert.LessOrEqual(t, np.Spec.Ports[0].NodePort, int32(32767))
	assert.Equal(t, corev1.ServiceExternalTrafficPolicyCluster, np.Spec.ExternalTrafficPolicy)

	headless, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "db"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"None"}, headless.Spec.ClusterIPs)

	_, err = svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "noports"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "spec.ports: Required value")
}

// A PUT that leaves out the allocated cluster IP keeps it (the allocation
// hook runs before the strategy carries the old value over).
func TestServicePutKeepsClusterIP(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	s, err := c.CoreV1().Services("default").Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	u, err := c.CoreV1().Services("default").Update(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: s.ResourceVersion, Labels: map[string]string{"x": "y"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, s.Spec.ClusterIPs, u.Spec.ClusterIPs)
}

// The kubernetes service and service CIDR exist from the start, and every
// cluster IP is recorded as an IPAddress held by its service, as on
// kube-apiserver 1.37.
func TestServiceIPAddresses(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	ctx := t.Context()
	k, err := c.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1", k.Spec.ClusterIP)
	assert.Equal(t, int32(443), k.Spec.Ports[0].Port)
	cidr, err := c.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"10.0.0.0/24"}, cidr.Spec.CIDRs)
	require.NotEmpty(t, cidr.Status.Conditions)

	s, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	ip, err := c.NetworkingV1().IPAddresses().Get(ctx, s.Spec.ClusterIP, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}, ip.Spec.ParentRef)
	assert.Equal(t, "IPv4", ip.Labels["ipaddress.kubernetes.io/ip-family"])

	require.NoError(t, c.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}))
	_, err = c.NetworkingV1().IPAddresses().Get(ctx, s.Spec.ClusterIP, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the record goes with the service: %v", err)
}

// A write of a Service gets kube-apiserver's warnings about the fields it
// ignores or deprecates.
func TestServiceWarnings(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	cfg := srv.RESTConfig()
	var warnings warningRecorder
	cfg.WarningHandler = &warnings
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = c.CoreV1().Services("default").Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, ExternalName: "example.com",
			TrafficDistribution: ptr(corev1.ServiceTrafficDistributionPreferClose)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{`spec.externalName is ignored when spec.type is not "ExternalName"`,
		`spec.trafficDistribution: "PreferClose" is deprecated; use "PreferSameZone"`}, warnings.get())
}

type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningRecorder) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// Options.ServiceClusterIPRange is kube-apiserver's
// --service-cluster-ip-range: default/kubernetes takes its first address,
// the "kubernetes" ServiceCIDR holds it, and Services' IPs come from it.
func TestServiceClusterIPRange(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, func(o *apiserver.Options) { o.ServiceClusterIPRange = "10.96.0.0/12" })
	c := clientset(t, srv)
	ctx := t.Context()
	own, err := c.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "10.96.0.1", own.Spec.ClusterIP)
	cidr, err := c.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"10.96.0.0/12"}, cidr.Spec.CIDRs)

	svcs := c.CoreV1().Services("default")
	s, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "auto"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	ip, err := netip.ParseAddr(s.Spec.ClusterIP)
	require.NoError(t, err)
	assert.True(t, netip.MustParsePrefix("10.96.0.0/12").Contains(ip), ip)
	_, err = svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "far"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.100.7.7", Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	require.NoError(t, err, "in the range, beyond the default's /24")
	_, err = svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "out"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.9", Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "the default range is not this server's: %v", err)
}

// A range kubeembed cannot serve is refused by New, each with its reason.
func TestServiceClusterIPRangeRefused(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]string{"fd00::/108": "not an IPv4 range", "10.0.0.0/31": "a prefix of 31 bits",
		"10.0.0.0/4": "a prefix of 4 bits", "ten": "not a CIDR", "10.0.0.0/16,fd00::/108": "a list of ranges"} {
		_, err := apiserver.New(apiserver.Options{ServiceClusterIPRange: value})
		require.Error(t, err, value)
		assert.Contains(t, err.Error(), `options: ServiceClusterIPRange "`+value+`": `+want, value)
	}
}
