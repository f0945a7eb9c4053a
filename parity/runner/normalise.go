package runner

import (
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Normaliser rewrites what legitimately differs between two servers that
// answer the same requests, so that what remains is a real difference:
//
//   - uids become <uid-N>, numbered by first appearance, so that an owner
//     reference still points at the same object;
//   - resource versions become <rv-N>, ranked by value, so that their order
//     is compared but not their numbers; they are also replaced inside
//     messages; a list's or a bookmark's becomes <list-rv>;
//   - timestamps (RFC 3339) become <time>, a table's Age cells <age>;
//   - a name made from generateName becomes generateName+<gen-N>;
//   - continue tokens become <continue>;
//   - service IPs inside ServiceCIDR become <service-ip>, node ports in
//     30000-32767 become <node-port> (an address outside stays as it is);
//   - host:port of the server itself becomes <server>;
//   - the random suffix of a pod's kube-api-access-xxxxx volume becomes
//     <rand>;
//   - a container's ID (containerd://<64 hex>) becomes
//     containerd://<container-id>;
//   - the suffix of an Event's name (its involved object's name, a dot
//     and the time in hexadecimal nanoseconds) becomes <event>.
//
// With Concurrent (the scenarios of a cluster, where controllers, a
// scheduler and a kubelet write concurrently, events are recorded
// asynchronously and a step polls until a state shows, catching the writes
// before it at random) the resource versions of objects and of references
// to them (an event's involvedObject) all become <rv>: neither their order
// nor their number is compared. Managed fields are sorted by manager and
// subresource: the server sorts them by the second of their last write,
// which such writes cross at random. For the same reason an Endpoints' or
// EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time
// annotation (set when a pod's Ready condition changed second since the
// last sync) is removed, with its managed field, a slice's generation
// (how many syncs wrote it) becomes <generation>, and its endpoints are
// sorted by address (the controllers add them in the order of a Go map's
// iteration). An event list is sorted by reason and message: the server
// lists events by name, which ends in the time the recorder made it, and
// concurrent recorders (a scheduler's Scheduled, a kubelet's Pulling for
// the same pod) cross at random.
//
// A Normaliser is for one scenario on one server.
type Normaliser struct {
	ServiceCIDR *net.IPNet
	Concurrent  bool

	uids  map[string]string
	gens  map[string]string
	rvs   map[string]string
	order []string // uids, then generated names, in order of appearance
}

var (
	timeRE   = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`)
	uidAnyRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	uidRE    = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	serverRE = regexp.MustCompile(`(127\.0\.0\.1|localhost|\[::1\]):\d{2,5}`)
	digitsRE = regexp.MustCompile(`\b\d+\b`)
	// The ServiceAccount admission plugin names the token volume it adds
	// with a random suffix.
	tokenVolRE = regexp.MustCompile(`\bkube-api-access-[a-z0-9]{5}\b`)
	// The container runtime names containers with random IDs.
	containerIDRE = regexp.MustCompile(`\bcontainerd://[0-9a-f]{64}\b`)
	// An event recorder names an event after its object and the time.
	eventNameRE = regexp.MustCompile(`\.[0-9a-f]{16}$`)
)

// NormaliseAll normalises the responses of one scenario on one server.
func NormaliseAll(cidr *net.IPNet, resps []Response) []Response {
	return Normalise(&Normaliser{ServiceCIDR: cidr}, resps)
}

// Normalise normalises the responses of one scenario on one server with n,
// which it fills.
func Normalise(n *Normaliser, resps []Response) []Response {
	n.uids, n.gens, n.rvs = map[string]string{}, map[string]string{}, map[string]string{}
	if n.Concurrent {
		// Before uids and names are numbered in order of appearance.
		for _, r := range resps {
			if m, ok := r.Body.(map[string]any); ok {
				sortEvents(m)
			}
		}
	}
	var rvs []uint64
	seen := map[uint64]bool{}
	for _, r := range resps {
		n.collect(r.Body, "", &rvs, seen)
		for _, e := range r.Events {
			n.collect(e, "", &rvs, seen)
		}
	}
	sort.Slice(rvs, func(i, j int) bool { return rvs[i] < rvs[j] })
	for i, v := range rvs {
		n.rvs[strconv.FormatUint(v, 10)] = fmt.Sprintf("<rv-%d>", i+1)
	}
	out := make([]Response, len(resps))
	for i, r := range resps {
		o := Response{Code: r.Code, Err: n.str(r.Err), Headers: map[string][]string{}}
		for k, vs := range r.Headers {
			for _, v := range vs {
				if k == "Warning" {
					// Its code (299) is no resource version.
					o.Headers[k] = append(o.Headers[k], n.names(v))
					continue
				}
				o.Headers[k] = append(o.Headers[k], n.str(v))
			}
		}
		o.Body = n.rewrite(r.Body, "")
		for _, e := range r.Events {
			o.Events = append(o.Events, n.rewrite(e, ""))
		}
		out[i] = o
	}
	return out
}

// isList reports a list or a table, whose resource version is the server's
// latest revision rather than an object's.
func isList(m map[string]any) bool {
	_, items := m["items"]
	return items || m["kind"] == "Table"
}

// isBookmark reports a watch bookmark, whose resource version is also the
// server's latest revision.
func isBookmark(m map[string]any) bool { return m["type"] == "BOOKMARK" }

// collect records uids, generated names and resource versions.
func (n *Normaliser) collect(v any, key string, rvs *[]uint64, seen map[uint64]bool) {
	switch v := v.(type) {
	case map[string]any:
		if isBookmark(v) {
			return // not ranked: see rewrite
		}
		if isList(v) {
			// Not ranked: see rewrite.
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if k != "metadata" {
					n.collect(v[k], k, rvs, seen)
				}
			}
			return
		}
		if gn, ok := v["generateName"].(string); ok && gn != "" {
			if name, ok := v["name"].(string); ok && strings.HasPrefix(name, gn) && n.gens[name] == "" {
				n.gens[name] = fmt.Sprintf("%s<gen-%d>", gn, len(n.gens)+1)
				n.order = append(n.order, name)
			}
		}
		// Keys in order: numbering by first appearance must not depend on
		// map iteration (a uid and an owner's in one object were numbered
		// either way, at random).
		for _, k := range slices.Sorted(maps.Keys(v)) {
			n.collect(v[k], k, rvs, seen)
		}
	case []any:
		for _, e := range v {
			n.collect(e, key, rvs, seen)
		}
	case string:
		switch {
		case key == "resourceVersion":
			if u, err := strconv.ParseUint(v, 10, 64); err == nil && !seen[u] {
				seen[u] = true
				*rvs = append(*rvs, u)
			}
		case uidRE.MatchString(v) && n.uids[v] == "":
			n.uids[v] = fmt.Sprintf("<uid-%d>", len(n.uids)+1)
			n.order = append(n.order, v)
		}
	}
}

func (n *Normaliser) rewrite(v any, key string) any {
	switch v := v.(type) {
	case map[string]any:
		return n.rewriteMap(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = n.rewrite(e, key)
		}
		return out
	case float64:
		if (key == "nodePort" || key == "healthCheckNodePort") && v >= 30000 && v <= 32767 {
			return "<node-port>"
		}
		return v
	case string:
		return n.rewriteString(v, key)
	}
	return v
}

// rewriteMap rewrites an object: its values and its keys, and the resource
// versions of bookmarks and lists, which only say that there is one.
func (n *Normaliser) rewriteMap(v map[string]any) map[string]any {
	if isBookmark(v) {
		if obj, ok := v["object"].(map[string]any); ok {
			v = maps.Clone(v)
			v["object"] = withListRV(obj)
		}
	}
	if isList(v) {
		// A list's resource version is the server's latest revision,
		// which background writes (leases, events) move on the real
		// server; only its presence is compared.
		v = withListRV(v)
	}
	out := make(map[string]any, len(v))
	for k, e := range v {
		// Keys too: managed fields name list items by key, such as a
		// generated volume name.
		out[n.names(k)] = n.rewrite(e, k)
	}
	n.table(out)
	if mf, ok := out["managedFields"].([]any); ok && n.Concurrent {
		slices.SortStableFunc(mf, func(a, b any) int {
			key := func(e any) string {
				m, _ := e.(map[string]any)
				return fmt.Sprint(m["manager"], "/", m["operation"], "/", m["subresource"])
			}
			return strings.Compare(key(a), key(b))
		})
	}
	if n.Concurrent {
		withoutSyncTiming(out)
	}
	if _, ok := v["resourceVersion"].(string); ok && n.Concurrent && !isList(v) {
		out["resourceVersion"] = "<rv>"
	}
	return out
}

// withoutSyncTiming removes from an Endpoints or EndpointSlice what
// depends on how the endpoint controllers' syncs fell (see Normaliser).
func withoutSyncTiming(obj map[string]any) {
	_, slice := obj["addressType"]
	_, endpoints := obj["subsets"]
	meta, ok := obj["metadata"].(map[string]any)
	if !ok || !slice && !endpoints && obj["kind"] != "Endpoints" {
		return
	}
	const trigger = "endpoints.kubernetes.io/last-change-trigger-time"
	if slice {
		meta["generation"] = "<generation>"
		if eps, ok := obj["endpoints"].([]any); ok {
			slices.SortStableFunc(eps, func(a, b any) int {
				return strings.Compare(fmt.Sprint(getPath(a, "addresses")), fmt.Sprint(getPath(b, "addresses")))
			})
		}
	}
	if a, ok := meta["annotations"].(map[string]any); ok {
		delete(a, trigger)
		if len(a) == 0 {
			delete(meta, "annotations")
		}
	}
	mf, _ := meta["managedFields"].([]any)
	for _, e := range mf {
		dropPath(e, []string{"fieldsV1", "f:metadata", "f:annotations", "f:" + trigger})
		if a, ok := getPath(e, "fieldsV1", "f:metadata", "f:annotations").(map[string]any); ok && len(a) == 1 {
			dropPath(e, []string{"fieldsV1", "f:metadata", "f:annotations"})
		}
	}
}

// sortEvents sorts the items of an event list (core/v1 or events.k8s.io)
// by reason and message (see Normaliser).
func sortEvents(list map[string]any) {
	items, ok := list["items"].([]any)
	if kind, _ := list["kind"].(string); !ok || kind != "EventList" {
		return
	}
	key := func(e any) string {
		text := getPath(e, "message")
		if text == nil {
			text = getPath(e, "note")
		}
		// Without what differs between servers (uids, generated names'
		// suffixes are kept: they sort alike only by chance).
		return fmt.Sprint(getPath(e, "reason"), "/", uidAnyRE.ReplaceAllString(fmt.Sprint(text), ""))
	}
	slices.SortStableFunc(items, func(a, b any) int { return strings.Compare(key(a), key(b)) })
}

// getPath is v's value at path, nil if there is none.
func getPath(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// withListRV returns a copy of obj whose metadata.resourceVersion, if it
// has one, is <list-rv>.
func withListRV(obj map[string]any) map[string]any {
	meta, ok := obj["metadata"].(map[string]any)
	if !ok || meta["resourceVersion"] == nil {
		return obj
	}
	meta = maps.Clone(meta)
	meta["resourceVersion"] = "<list-rv>"
	obj = maps.Clone(obj)
	obj["metadata"] = meta
	return obj
}

// rewriteString rewrites a string value under key.
func (n *Normaliser) rewriteString(v, key string) any {
	switch key {
	case "resourceVersion":
		if p, ok := n.rvs[v]; ok {
			return p
		}
	case "continue":
		if v != "" {
			return "<continue>"
		}
	}
	if timeRE.MatchString(v) {
		return "<time>"
	}
	// A service IP anywhere (clusterIP, clusterIPs, ip, a table cell).
	if ip := net.ParseIP(v); ip != nil && n.ServiceCIDR != nil && n.ServiceCIDR.Contains(ip) {
		return "<service-ip>"
	}
	if key == "message" {
		return n.str(v)
	}
	if key == "name" && eventNameRE.MatchString(v) {
		return eventNameRE.ReplaceAllString(n.names(v), ".<event>")
	}
	return n.names(v)
}

// str replaces uids, generated names, resource versions and the server's
// address inside a string such as a message.
func (n *Normaliser) str(s string) string {
	if s == "" {
		return s
	}
	s = n.names(s)
	if len(n.rvs) == 0 {
		return s
	}
	// A number right after a colon is a port (host:443), not a version.
	var b strings.Builder
	last := 0
	for _, m := range digitsRE.FindAllStringIndex(s, -1) {
		d := s[m[0]:m[1]]
		p, ok := n.rvs[d]
		if !ok || len(d) < 2 || m[0] > 0 && s[m[0]-1] == ':' {
			continue
		}
		b.WriteString(s[last:m[0]])
		b.WriteString(p)
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// names replaces uids, generated names and the server's address.
func (n *Normaliser) names(s string) string {
	// Uids first: a generated name can occur inside a random uid (db-1 in
	// 1df6b6db-13a0-...), never the other way round.
	for _, old := range n.order {
		if p, ok := n.uids[old]; ok {
			s = strings.ReplaceAll(s, old, p)
		}
	}
	for _, old := range n.order {
		if p, ok := n.gens[old]; ok {
			s = strings.ReplaceAll(s, old, p)
		}
	}
	s = serverRE.ReplaceAllString(s, "<server>")
	s = containerIDRE.ReplaceAllString(s, "containerd://<container-id>")
	return tokenVolRE.ReplaceAllString(s, "kube-api-access-<rand>")
}

// table replaces the cells of a Table's Age column, which depend on when
// the request ran.
func (n *Normaliser) table(m map[string]any) {
	if m["kind"] != "Table" {
		return
	}
	cols, _ := m["columnDefinitions"].([]any)
	age := -1
	for i, c := range cols {
		if cm, ok := c.(map[string]any); ok && cm["name"] == "Age" {
			age = i
		}
	}
	if age < 0 {
		return
	}
	rows, _ := m["rows"].([]any)
	for _, r := range rows {
		rm, _ := r.(map[string]any)
		cells, _ := rm["cells"].([]any)
		if age < len(cells) {
			cells[age] = "<age>"
		}
	}
}

// dropPath removes a dotted path from v; "*" matches every element of a
// list or every key of a map.
func dropPath(v any, path []string) {
	if len(path) == 0 {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		if path[0] == "*" {
			for _, e := range v {
				dropPath(e, path[1:])
			}
			return
		}
		if len(path) == 1 {
			delete(v, path[0])
			return
		}
		dropPath(v[path[0]], path[1:])
	case []any:
		for _, e := range v {
			if path[0] == "*" {
				dropPath(e, path[1:])
			}
		}
	}
}
