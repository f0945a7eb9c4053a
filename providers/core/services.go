package core

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/internal/podspec"
	"github.com/kubeembed/apiserver/providers/registry"
)

// defaultServiceCIDR is kube-apiserver's default --service-cluster-ip-range,
// the range of a server whose Config gives none. Its first address belongs
// to the "kubernetes" service.
var defaultServiceCIDR = netip.MustParsePrefix("10.0.0.0/24")

// serviceCIDR is the server's service cluster IP range.
func serviceCIDR(cfg providers.Config) netip.Prefix {
	if cfg.ServiceClusterIPRange.IsValid() {
		return cfg.ServiceClusterIPRange
	}
	return defaultServiceCIDR
}

// NodePortRange is kube-apiserver's default --service-node-port-range.
const nodePortMin, nodePortMax = 30000, 32767

func defaultService(s *corev1.Service) {
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	if s.Spec.SessionAffinity == "" {
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && s.Spec.SessionAffinityConfig == nil {
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(corev1.DefaultClientIPServiceAffinitySeconds)}}
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		if s.Spec.ExternalTrafficPolicy == "" {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.AllocateLoadBalancerNodePorts == nil {
		s.Spec.AllocateLoadBalancerNodePorts = ptr.To(true)
	}
	if s.Spec.Type != corev1.ServiceTypeExternalName && s.Spec.InternalTrafficPolicy == nil {
		s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	}
}

// allocator hands out service cluster IPs and node ports; one per server.
// As kube-apiserver's allocators (KEP-3070, KEP-3668), what it picks comes
// from the upper part of each range first, the lower part being left to
// Services that ask for their own IP or port; kube-apiserver picks at
// random within a part, kubeembed in order (the first Service of a new
// server gets the same IP every time).
type allocator struct {
	cidr  netip.Prefix // the service cluster IP range
	mu    sync.Mutex
	ips   map[netip.Addr]bool
	ports map[int32]bool
	// nextIP and nextPort are where the next search starts, as positions
	// in the order ipAt and portAt give.
	nextIP, nextPort uint32
}

func newAllocator(cidr netip.Prefix) *allocator {
	// The first address is the kubernetes service's: never handed out
	// unless asked for (see allocateIP).
	return &allocator{cidr: cidr, ips: map[netip.Addr]bool{}, ports: map[int32]bool{}}
}

// reset forgets every allocation, as a new server's allocator has none
// (repairAllocations then marks the stored Services').
func (a *allocator) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.ips)
	clear(a.ports)
	a.nextIP, a.nextPort = 0, 0
}

func (a *allocator) allocateIP(requested string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if requested != "" {
		// The network and broadcast addresses are not the range's, as
		// kube-apiserver's ServiceCIDRs see them.
		ip, err := netip.ParseAddr(requested)
		if err != nil || !a.cidr.Contains(ip) || ip == a.cidr.Addr() || ip == a.broadcast() {
			return "", fmt.Errorf("failed to allocate IP %s: the provided network does not match the current range", requested)
		}
		if a.ips[ip] {
			return "", fmt.Errorf("provided IP is already allocated")
		}
		a.ips[ip] = true
		return ip.String(), nil
	}
	hosts := uint32(1)<<(32-a.cidr.Bits()) - 2 // .1 to the one before the broadcast address
	n := hosts - 1                             // but .1, the kubernetes service's
	for i := range n {
		pos := (a.nextIP + i) % n
		if ip := a.ipAt(pos, hosts); !a.ips[ip] {
			a.ips[ip] = true
			a.nextIP = (pos + 1) % n
			return ip.String(), nil
		}
	}
	return "", fmt.Errorf("range is full")
}

// ipAt is the address at position pos of the allocation order: the upper
// part of the range (from kube-apiserver's offset, min(max(16, size/16),
// 256) addresses after .1), then the lower part without .1.
func (a *allocator) ipAt(pos, hosts uint32) netip.Addr {
	lower := rangeOffset(hosts+2, 16, 256, 16)
	idx := lower + pos // index from .1
	if lower == 0 {
		idx = 1 + pos
	} else if idx >= hosts {
		idx = 1 + idx - hosts
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(a.cidr.Addr().AsSlice())+1+idx)
	return netip.AddrFrom4(b)
}

// broadcast is the range's last address.
func (a *allocator) broadcast() netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(a.cidr.Addr().AsSlice())|(uint32(1)<<(32-a.cidr.Bits())-1))
	return netip.AddrFrom4(b)
}

// rangeOffset is kube-apiserver's calculateRangeOffset: the size of a
// range's lower part, min(max(low, size/step), high), 0 for a range of
// low or fewer.
func rangeOffset(size, low, high, step uint32) uint32 {
	if size <= low {
		return 0
	}
	return min(max(low, size/step), high)
}

func (a *allocator) allocatePort(requested int32) (int32, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if requested != 0 {
		if requested < nodePortMin || requested > nodePortMax {
			return 0, fmt.Errorf("provided port is not in the valid range. The range of valid ports is %d-%d", nodePortMin, nodePortMax)
		}
		if a.ports[requested] {
			return 0, fmt.Errorf("provided port is already allocated")
		}
		a.ports[requested] = true
		return requested, nil
	}
	// Upper part first, as for IPs: kube-apiserver's offset is
	// min(max(16, size/32), 128) ports.
	size := uint32(nodePortMax - nodePortMin + 1)
	lower := rangeOffset(size, 16, 128, 32)
	for i := range size {
		pos := (a.nextPort + i) % size
		p := nodePortMin + int32((lower+pos)%size)
		if !a.ports[p] {
			a.ports[p] = true
			a.nextPort = (pos + 1) % size
			return p, nil
		}
	}
	return 0, fmt.Errorf("range is full")
}

func (a *allocator) release(s *corev1.Service) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ip := range s.Spec.ClusterIPs {
		if addr, err := netip.ParseAddr(ip); err == nil {
			delete(a.ips, addr)
		}
	}
	for _, p := range s.Spec.Ports {
		delete(a.ports, p.NodePort)
	}
}

// allocate fills in the cluster IP, IP families and node ports of a new
// Service.
func (a *allocator) allocate(s *corev1.Service) error {
	fail := func(p *field.Path, v any, err error) error {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), s.Name,
			field.ErrorList{field.Invalid(p, v, err.Error())})
	}
	if s.Spec.Type != corev1.ServiceTypeExternalName {
		if len(s.Spec.IPFamilies) == 0 {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		}
		if s.Spec.IPFamilyPolicy == nil {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		}
		switch {
		case s.Spec.ClusterIP == corev1.ClusterIPNone:
			s.Spec.ClusterIPs = []string{corev1.ClusterIPNone}
		default:
			requested := s.Spec.ClusterIP
			if requested == "" && len(s.Spec.ClusterIPs) > 0 {
				requested = s.Spec.ClusterIPs[0]
			}
			ip, err := a.allocateIP(requested)
			if err != nil {
				return fail(field.NewPath("spec", "clusterIPs"), []string{requested}, err)
			}
			s.Spec.ClusterIP, s.Spec.ClusterIPs = ip, []string{ip}
		}
	}
	if needsNodePorts(s) {
		for i := range s.Spec.Ports {
			p, err := a.allocatePort(s.Spec.Ports[i].NodePort)
			if err != nil {
				a.release(s)
				return fail(field.NewPath("spec", "ports").Index(i).Child("nodePort"), s.Spec.Ports[i].NodePort, err)
			}
			s.Spec.Ports[i].NodePort = p
		}
	}
	return nil
}

// carryOver keeps the allocated values an update leaves out, as
// kube-apiserver patches them in: the cluster IPs while both need one, the
// node ports (by port name, unless taken by another port) while both need
// them. A change to a type that needs none drops them.
func carryOver(s, o *corev1.Service) {
	needsClusterIP := func(s *corev1.Service) bool { return s.Spec.Type != corev1.ServiceTypeExternalName }
	if needsClusterIP(s) && needsClusterIP(o) {
		if s.Spec.ClusterIP == "" {
			s.Spec.ClusterIP = o.Spec.ClusterIP
		}
		if len(s.Spec.ClusterIPs) == 0 && len(o.Spec.ClusterIPs) > 0 {
			s.Spec.ClusterIPs = o.Spec.ClusterIPs
		}
		// and their families (kube-apiserver's initIPFamilyFields)
		if len(s.Spec.IPFamilies) == 0 {
			s.Spec.IPFamilies = o.Spec.IPFamilies
		}
		if s.Spec.IPFamilyPolicy == nil {
			s.Spec.IPFamilyPolicy = o.Spec.IPFamilyPolicy
		}
	}
	if !needsNodePorts(s) || !needsNodePorts(o) {
		return
	}
	byName, used := map[string]int32{}, map[int32]bool{}
	for _, p := range o.Spec.Ports {
		byName[p.Name] = p.NodePort
	}
	inOld := map[int32]bool{}
	for _, p := range o.Spec.Ports {
		inOld[p.NodePort] = p.NodePort != 0
	}
	for _, p := range s.Spec.Ports {
		used[p.NodePort] = inOld[p.NodePort]
	}
	for i := range s.Spec.Ports {
		if p := &s.Spec.Ports[i]; p.NodePort == 0 && !used[byName[p.Name]] {
			p.NodePort = byName[p.Name]
		}
	}
}

// fillMissing allocates what an update of s needs and lacks (a cluster IP
// or node ports, after a change of type), and returns a Service holding
// only what it allocated.
func (a *allocator) fillMissing(s *corev1.Service) (*corev1.Service, error) {
	added := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace}}
	if s.Spec.Type != corev1.ServiceTypeExternalName && s.Spec.ClusterIP == "" && len(s.Spec.ClusterIPs) == 0 {
		fresh := &corev1.Service{ObjectMeta: s.ObjectMeta, Spec: corev1.ServiceSpec{Type: s.Spec.Type,
			IPFamilies: s.Spec.IPFamilies, IPFamilyPolicy: s.Spec.IPFamilyPolicy}}
		if err := a.allocate(fresh); err != nil {
			return nil, err
		}
		s.Spec.ClusterIP, s.Spec.ClusterIPs = fresh.Spec.ClusterIP, fresh.Spec.ClusterIPs
		s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = fresh.Spec.IPFamilies, fresh.Spec.IPFamilyPolicy
		added.Spec.ClusterIPs = fresh.Spec.ClusterIPs
	}
	if needsNodePorts(s) {
		for i := range s.Spec.Ports {
			if s.Spec.Ports[i].NodePort != 0 {
				continue
			}
			p, err := a.allocatePort(0)
			if err != nil {
				a.release(added)
				return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), s.Name,
					field.ErrorList{field.Invalid(field.NewPath("spec", "ports").Index(i).Child("nodePort"), 0, err.Error())})
			}
			s.Spec.Ports[i].NodePort = p
			added.Spec.Ports = append(added.Spec.Ports, corev1.ServicePort{NodePort: p})
		}
	}
	return added, nil
}

func needsNodePorts(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeNodePort ||
		(s.Spec.Type == corev1.ServiceTypeLoadBalancer && (s.Spec.AllocateLoadBalancerNodePorts == nil || *s.Spec.AllocateLoadBalancerNodePorts))
}

// serviceTypes in the order kube-apiserver lists them.
var serviceTypes = []string{string(corev1.ServiceTypeClusterIP), string(corev1.ServiceTypeExternalName), string(corev1.ServiceTypeLoadBalancer), string(corev1.ServiceTypeNodePort)}

func validateService(s *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec")
	if !sets.New(serviceTypes...).Has(string(s.Spec.Type)) {
		errs = append(errs, field.NotSupported(p.Child("type"), s.Spec.Type, serviceTypes))
	}
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(s.Spec.ExternalName) {
			errs = append(errs, field.Invalid(p.Child("externalName"), s.Spec.ExternalName, msg))
		}
	} else if len(s.Spec.Ports) == 0 && s.Spec.ClusterIP != corev1.ClusterIPNone {
		errs = append(errs, field.Required(p.Child("ports"), ""))
	}
	portNames := sets.New[string]()
	for i, port := range s.Spec.Ports {
		pp := p.Child("ports").Index(i)
		if len(s.Spec.Ports) > 1 && port.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), ""))
		} else if port.Name != "" {
			for _, msg := range utilvalidation.IsDNS1123Label(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if portNames.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			portNames.Insert(port.Name)
		}
		for _, msg := range utilvalidation.IsValidPortNum(int(port.Port)) {
			errs = append(errs, field.Invalid(pp.Child("port"), port.Port, msg))
		}
		if !podspec.Protocols().Has(string(port.Protocol)) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, sets.List(podspec.Protocols())))
		}
		if port.NodePort != 0 && s.Spec.Type == corev1.ServiceTypeClusterIP {
			errs = append(errs, field.Forbidden(pp.Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(s.Spec.Selector, p.Child("selector"))...)
	return errs
}

var services = registry.Kind[*corev1.Service]{
	Default:      defaultService,
	GroupVersion: corev1.SchemeGroupVersion, Resource: "services", Singular: "service",
	ShortNames: []string{"svc"}, Categories: []string{"all"}, Namespaced: true,
	NameValidation: apivalidation.NameIsDNSLabel,
	NewObj:         func() runtime.Object { return &corev1.Service{} },
	NewList:        func() runtime.Object { return &corev1.ServiceList{} },
	Status:         true, StatusWritesLabels: true,
	// DELETE returns the deleted Service, as kube-apiserver's; Delete below
	// needs it to release what was allocated.
	ReturnDeleted: true,
	PrepareUpdate: func(s, old *corev1.Service) { carryOver(s, old) },
	Validate:      validateService,
	Warnings:      serviceWarnings,
	ValidateUpdate: func(s, old *corev1.Service) field.ErrorList {
		if s.Spec.Type == old.Spec.Type && old.Spec.ClusterIP != "" && s.Spec.ClusterIP != old.Spec.ClusterIP {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), s.Spec.ClusterIPs, "may not change once set")}
		}
		return nil
	},
	NoAge: true, Columns: serviceColumns(),
	Customize: allocateServices,
}

// allocateServices makes allocation a transaction around the write, on
// every path that creates (POST, and PUT or apply of a missing service) or
// changes the type: released if the write fails or is a dry run.
func allocateServices(cfg providers.Config, store *registry.Store, s map[string]rest.Storage) error {
	alloc := newAllocator(serviceCIDR(cfg))
	ips, err := newIPAddresses(cfg)
	if err != nil {
		return err
	}
	finish := func(s *corev1.Service, dryRun bool) genericregistry.FinishFunc {
		return func(ctx context.Context, success bool) {
			if !success || dryRun {
				alloc.release(s)
				return
			}
			ips.record(ctx, s)
		}
	}
	store.Store.BeginCreate = func(_ context.Context, obj runtime.Object, opts *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
		s := obj.(*corev1.Service)
		if err := alloc.allocate(s); err != nil {
			return nil, err
		}
		return finish(s, len(opts.DryRun) > 0), nil
	}
	store.Store.BeginUpdate = func(_ context.Context, obj, old runtime.Object, opts *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
		// BeginUpdate runs before PrepareForUpdate: what the update keeps is
		// carried over first, so that only what is missing is allocated.
		carryOver(obj.(*corev1.Service), old.(*corev1.Service))
		added, err := alloc.fillMissing(obj.(*corev1.Service))
		if err != nil {
			return nil, err
		}
		return finish(added, len(opts.DryRun) > 0), nil
	}
	s["services"] = &serviceREST{Store: store, alloc: alloc, ips: ips}
	cfg.AfterRestore(func(ctx context.Context) error {
		alloc.reset() // what the restore deleted is free again
		return repairAllocations(ctx, store, alloc)
	})
	return cfg.AddPostStartHook("start-service-ip-repair-controllers", func(ctx genericapiserver.PostStartHookContext) error {
		return repairAllocations(ctx, store, alloc)
	})
}

// repairAllocations marks the cluster IPs and node ports of the services
// already stored as allocated, as kube-apiserver's repair controllers
// rebuild its allocators: a server started on storage that holds services
// (another server's, or a restarted one's) must not hand them out again.
func repairAllocations(ctx context.Context, store *registry.Store, alloc *allocator) error {
	list, err := store.List(genericapirequest.WithNamespace(ctx, metav1.NamespaceAll), &metainternalversion.ListOptions{})
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	for _, s := range list.(*corev1.ServiceList).Items {
		for _, ip := range s.Spec.ClusterIPs {
			_, _ = alloc.allocateIP(ip) // None, or allocated by a write since
		}
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				_, _ = alloc.allocatePort(p.NodePort)
			}
		}
	}
	return nil
}

// serviceREST allocates cluster IPs and node ports on create and releases
// them on delete, as kube-apiserver's service REST does.
type serviceREST struct {
	*registry.Store
	alloc *allocator
	ips   *ipAddresses
}

// Delete implements rest.GracefulDeleter.
func (r *serviceREST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, deleted, err := r.Store.Delete(ctx, name, deleteValidation, options)
	if err == nil && deleted && (options == nil || len(options.DryRun) == 0) {
		if s, ok := obj.(*corev1.Service); ok {
			r.alloc.release(s)
			r.ips.forget(ctx, s)
		}
	}
	return obj, deleted, err
}

// serviceColumns are kubectl get services' columns after NAME.
func serviceColumns() []registry.Column {
	c := registry.ColumnOf[*corev1.Service]
	return []registry.Column{
		c("Type", "string", corev1.ServiceSpec{}.SwaggerDoc()["type"], 0, func(s *corev1.Service) any { return string(s.Spec.Type) }),
		c("Cluster-IP", "string", corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"], 0, func(s *corev1.Service) any {
			if len(s.Spec.ClusterIPs) == 0 {
				return "<none>"
			}
			return s.Spec.ClusterIPs[0]
		}),
		c("External-IP", "string", corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"], 0, serviceExternalIP),
		c("Port(s)", "string", corev1.ServiceSpec{}.SwaggerDoc()["ports"], 0, func(s *corev1.Service) any {
			out := ""
			for i, p := range s.Spec.Ports {
				if i > 0 {
					out += ","
				}
				if p.NodePort != 0 {
					out += fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
				} else {
					out += fmt.Sprintf("%d/%s", p.Port, p.Protocol)
				}
			}
			if out == "" {
				return "<none>"
			}
			return out
		}),
		registry.AgeColumn(),
		c("Selector", "string", corev1.ServiceSpec{}.SwaggerDoc()["selector"], 1, func(s *corev1.Service) any {
			if len(s.Spec.Selector) == 0 {
				return "<none>"
			}
			return metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: s.Spec.Selector})
		}),
	}
}

// serviceExternalIP is what kubectl get services shows as EXTERNAL-IP: the
// external IPs a ClusterIP or NodePort service is also reachable at; for a
// load balancer the addresses of its ingress points, sorted and each once,
// then its external IPs.
func serviceExternalIP(s *corev1.Service) any {
	switch s.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(s.Spec.ExternalIPs) == 0 {
			return "<none>"
		}
		return strings.Join(s.Spec.ExternalIPs, ",")
	case corev1.ServiceTypeLoadBalancer:
		var addrs []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			if a := cmp.Or(in.IP, in.Hostname); a != "" {
				addrs = append(addrs, a)
			}
		}
		slices.Sort(addrs)
		addrs = append(slices.Compact(addrs), s.Spec.ExternalIPs...)
		if len(addrs) == 0 {
			return "<pending>"
		}
		return strings.Join(addrs, ",")
	case corev1.ServiceTypeExternalName:
		return s.Spec.ExternalName
	}
	return "<unknown>"
}

// ipAddresses writes the networking.k8s.io IPAddress objects that record
// which service holds each cluster IP, as kube-apiserver's allocator does.
type ipAddresses struct{ store *registry.Store }

func newIPAddresses(cfg providers.Config) (*ipAddresses, error) {
	store, err := registry.Kind[*networkingv1.IPAddress]{
		GroupVersion: networkingv1.SchemeGroupVersion, Resource: "ipaddresses", Singular: "ipaddress",
		NewObj:  func() runtime.Object { return &networkingv1.IPAddress{} },
		NewList: func() runtime.Object { return &networkingv1.IPAddressList{} },
	}.Store(cfg)
	if err != nil {
		return nil, err
	}
	return &ipAddresses{store: store}, nil
}

// allocatorManager is the field manager kube-apiserver's allocator writes
// IPAddress objects as.
const allocatorManager = "kube-apiserver-v1.37.2"

func (a *ipAddresses) record(ctx context.Context, s *corev1.Service) {
	fields := []byte(`{"f:metadata":{"f:labels":{".":{},"f:ipaddress.kubernetes.io/ip-family":{},"f:ipaddress.kubernetes.io/managed-by":{}}},` +
		`"f:spec":{"f:parentRef":{".":{},"f:name":{},"f:namespace":{},"f:resource":{}}}}`)
	for _, ip := range s.Spec.ClusterIPs {
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			continue // None
		}
		family := "IPv4"
		if addr.Is6() {
			family = "IPv6"
		}
		obj := &networkingv1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Name: addr.String(), Labels: map[string]string{
				"ipaddress.kubernetes.io/ip-family": family, "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: allocatorManager, Operation: metav1.ManagedFieldsOperationUpdate,
					APIVersion: networkingv1.SchemeGroupVersion.String(), Time: ptr.To(metav1.Now()), FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields}}}},
			Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: s.Namespace, Name: s.Name}},
		}
		// A failure leaves the service without its record, which nothing
		// in this server depends on.
		_, _ = a.store.Create(genericapirequest.WithNamespace(ctx, ""), obj, nil, &metav1.CreateOptions{})
	}
}

func (a *ipAddresses) forget(ctx context.Context, s *corev1.Service) {
	for _, ip := range s.Spec.ClusterIPs {
		if addr, err := netip.ParseAddr(ip); err == nil {
			_, _, _ = a.store.Delete(genericapirequest.WithNamespace(ctx, ""), addr.String(), rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
		}
	}
}
