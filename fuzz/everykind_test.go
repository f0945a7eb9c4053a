package fuzz_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// creatable is a built-in collection that serves a create: a resource the
// server's discovery lists with the verb create.
type creatable struct {
	path string // the collection, in namespace ns when namespaced
	gvk  schema.GroupVersionKind
	// deletable is whether its verbs include delete: review kinds and
	// bindings answer a create without storing anything.
	deletable bool
	// dryRunOnly is whether it is always created with dryRun=All: see
	// the map of that name.
	dryRunOnly bool
}

// FuzzCreateEveryKind posts a body to the collection of each built-in kind
// that serves a create, in every version served: FuzzCreate's property and
// modes (post) over what discovery lists rather than a hand-picked few.
// target picks the collection of creatableKinds, sorted by path, so a
// byte means one collection for as long as discovery lists the same
// resources (a kind added by an upgrade moves those after it: re-point a
// kept crasher then). What is created is deleted, so each input meets the
// same state.
func FuzzCreateEveryKind(f *testing.F) {
	fx := start(f)
	kinds := creatableKinds(f, fx)
	for i, seed := range everyKindSeeds(f, fx, kinds) {
		for ct, body := range seed {
			if body != nil {
				f.Add(uint8(i), uint8(ct), body)
			}
		}
		f.Add(uint8(i), uint8(modeStrict|modeDryRun), seed[0])
	}
	f.Fuzz(func(t *testing.T, target, mode uint8, body []byte) {
		k := kinds[int(target)%len(kinds)]
		if k.dryRunOnly {
			mode |= modeDryRun
		}
		a := fx.post(t, k.path, mode, body)
		if !intOrStringPanic(a, contentTypes[mode&3]) {
			check(t, a)
		}
		if a.code/100 == 2 && mode&modeDryRun == 0 && k.deletable {
			fx.printed(t, k.path, a.body)
			fx.remove(t, k.path, a.body)
		}
		fx.done(t)
	})
}

// dryRunOnly are the kinds whose stored object would change how the
// server answers the next inputs, whatever the cleanup. The webhook
// admission plugin reads its configurations from an informer, so one stays
// in the chain for a moment after its DELETE is answered: a webhook for
// every request with failurePolicy Fail and a URL nothing serves would
// make the next input's answer a 500 ("failed calling webhook"), or keep
// it waiting its timeoutSeconds (up to 30 s, past requestTimeout), a
// finding of the fuzzer's own making. Dry run keeps the whole create path
// but the storage write: decoding, defaulting, admission, validation (which
// compiles matchConditions' CEL).
//
// The other kinds that configure the server are created for real and
// deleted at once. An APIService cannot take a path the fuzzer posts to:
// every group version served has its own local APIService (v1.apps, ...),
// so creating one of those names is a 409, and another group version is
// one nothing requests. An admission policy acts only through a binding
// and a binding only names a policy, and no input leaves either behind. A
// FlowSchema can only send requests to a priority level that exists, a
// bootstrap one (the fuzzer's own goes with its input), and each of those
// admits the fuzzer's requests, which come one at a time. A Namespace is
// deleted through /finalize (remove).
var dryRunOnly = map[schema.GroupResource]bool{
	{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}:   true,
	{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}: true,
}

// creatableKinds are the built-in collections of the server's discovery
// that serve a create, in every group version, sorted by path: no
// subresource (a name with '/'), no custom resource (a CRD's group and
// plural).
func creatableKinds(f *testing.F, fx *fixture) []creatable {
	f.Helper()
	custom := customResources(f, fx)
	var groups metav1.APIGroupList
	mustDecode(f, fx.must(f, http.MethodGet, "/apis", "", nil), &groups)
	prefixes := []string{"/api/v1"}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			prefixes = append(prefixes, "/apis/"+v.GroupVersion)
		}
	}
	var kinds []creatable
	for _, prefix := range prefixes {
		var list metav1.APIResourceList
		mustDecode(f, fx.must(f, http.MethodGet, prefix, "", nil), &list)
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			f.Fatalf("%s: %v", prefix, err)
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "create") || custom[gv.WithResource(r.Name).GroupResource()] {
				continue
			}
			path := prefix + "/" + r.Name
			if r.Namespaced {
				path = prefix + "/namespaces/" + ns + "/" + r.Name
			}
			kinds = append(kinds, creatable{path: path, gvk: gv.WithKind(r.Kind),
				deletable:  slices.Contains(r.Verbs, "delete"),
				dryRunOnly: dryRunOnly[gv.WithResource(r.Name).GroupResource()]})
		}
	}
	slices.SortFunc(kinds, func(a, b creatable) int { return strings.Compare(a.path, b.path) })
	if len(kinds) == 0 || len(kinds) > 256 {
		f.Fatalf("%d creatable kinds: a target byte picks one of 1 to 256", len(kinds))
	}
	return kinds
}

// customResources are the group and plural of every CRD the server has.
func customResources(f *testing.F, fx *fixture) map[schema.GroupResource]bool {
	f.Helper()
	var crds struct {
		Items []struct {
			Spec struct {
				Group string
				Names struct{ Plural string }
			}
		}
	}
	mustDecode(f, fx.must(f, http.MethodGet, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "", nil), &crds)
	custom := map[schema.GroupResource]bool{}
	for _, crd := range crds.Items {
		custom[schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}] = true
	}
	return custom
}

func mustDecode(f *testing.F, a answer, v any) {
	f.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		f.Fatalf("%s: %v", a.what, err)
	}
}
