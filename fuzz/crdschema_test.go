package fuzz_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kubeembed/apiserver/internal/retry"
)

// schemaGroup is the group of FuzzCRDSchema's CRDs.
const schemaGroup = "schema.fuzz.kubeembed.io"

// servedWithin bounds how long a CRD the server accepted may take to serve
// its resource: it is established and served in a few ms.
const servedWithin = 5 * time.Second

// FuzzCRDSchema creates a CRD whose openAPIV3Schema is schema (JSON), and
// when the server accepts it, applies obj (with the CRD's apiVersion, kind
// and a name set when it is a JSON object) as a custom resource, reads its
// OpenAPI v3 document, and deletes the CRD. Each input has a CRD of its own
// name: a deleted CRD goes only once its resources are cleaned up.
func FuzzCRDSchema(f *testing.F) {
	fx := start(f)
	widgetSchema, err := json.Marshal(widgetCRD(f).Spec.Versions[0].Schema.OpenAPIV3Schema)
	if err != nil {
		f.Fatalf("seed: %v", err)
	}
	f.Add(widgetSchema, []byte(widgetJSON))
	for _, s := range [][2]string{
		{`{"type":"object","x-kubernetes-preserve-unknown-fields":true}`, `{"spec":{"anything":[1,{"a":null}]}}`},
		{`{"type":"object","properties":{"spec":{"type":"object","properties":{"n":{"type":"integer","default":3,"minimum":1}},` +
			`"x-kubernetes-validations":[{"rule":"self.n < 10","messageExpression":"'n is ' + string(self.n)"}]}}}`,
			`{"spec":{"n":12}}`},
		{`{"type":"object","properties":{"spec":{"type":"object","properties":{"items":{"type":"array",` +
			`"items":{"type":"string"},"x-kubernetes-validations":[{"rule":"self.all(x, self.all(y, x != y || x == y))"}]}}}}}`,
			`{"spec":{"items":["a","b"]}}`},
		{`{"type":"object","properties":{"spec":{"type":"object","properties":{"v":{"x-kubernetes-int-or-string":true,` +
			`"anyOf":[{"type":"integer"},{"type":"string"}]},"m":{"type":"object","additionalProperties":{"type":"object",` +
			`"properties":{"q":{"type":"string","pattern":"^(a+)+$"}}}}},"oneOf":[{"required":["v"]},{"required":["m"]}]}}}`,
			`{"spec":{"v":"1","m":{"k":{"q":"aaaa"}}}}`},
		{`{"type":"object","properties":{"spec":{"type":"object","properties":{"l":{"type":"array","x-kubernetes-list-type":"map",` +
			`"x-kubernetes-list-map-keys":["k"],"items":{"type":"object","required":["k"],"properties":{"k":{"type":"string"},` +
			`"t":{"type":"string","format":"date-time","nullable":true}}}},"e":{"type":"object","x-kubernetes-embedded-resource":true,` +
			`"x-kubernetes-preserve-unknown-fields":true}},"x-kubernetes-validations":[{"rule":"oldSelf.l == self.l","optionalOldSelf":true}]}}}`,
			`{"spec":{"l":[{"k":"a","t":null},{"k":"b"}],"e":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}}}`},
		{`{"type":"object","properties":{"metadata":{"type":"object","properties":{"name":{"type":"string","maxLength":5}}},` +
			`"status":{"type":"object","properties":{"c":{"type":"string","enum":["x","y"],"default":"x"}}}}}`,
			`{"metadata":{"name":"x"},"status":{"c":"z"}}`},
		{`{"type":"object","properties":{"spec":{"type":"string","x-kubernetes-validations":[{"rule":"self.matches('^[a-z]+$') && ` +
			`self.split('-').size() < 3 && url(self).getHost() != ''","reason":"FieldValueInvalid","fieldPath":"."}]}}}`,
			`{"spec":"abc"}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, schema, obj []byte) {
		n := fx.iter.Load() + 1
		plural, kind := fmt.Sprintf("t%ds", n), fmt.Sprintf("T%d", n)
		crd := fmt.Appendf(nil, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",`+
			`"metadata":{"name":"%s.%s"},"spec":{"group":%q,"scope":"Namespaced","names":{"plural":%q,"kind":%q},`+
			`"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":%s}}]}}`,
			plural, schemaGroup, schemaGroup, plural, kind, schema)
		const crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
		a := fx.do(t, http.MethodPost, crds, "application/json", crd)
		check(t, a)
		if a.code/100 == 2 {
			fx.useCRD(t, plural, kind, obj)
			fx.remove(t, crds, a.body)
		}
		fx.done(t)
	})
}

// useCRD applies obj as a custom resource of the CRD once it serves it,
// then reads its list and the group's OpenAPI v3 document.
func (fx *fixture) useCRD(t *testing.T, plural, kind string, obj []byte) {
	t.Helper()
	var m map[string]any
	if json.Unmarshal(obj, &m) == nil && m != nil {
		md, _ := m["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
		}
		md["name"] = "x"
		m["apiVersion"], m["kind"], m["metadata"] = schemaGroup+"/v1", kind, md
		obj, _ = json.Marshal(m)
	}
	collection := "/apis/" + schemaGroup + "/v1/namespaces/" + ns + "/" + plural
	// Apply rather than create: a create waits 2 s after the CRD became
	// Established (for the other servers of an HA cluster), an apply that
	// creates does not.
	var a answer
	ctx, cancel := context.WithTimeout(context.Background(), servedWithin)
	defer cancel()
	err := retry.Until(ctx, func(context.Context) error {
		a = fx.do(t, http.MethodPatch, collection+"/x?fieldManager=fuzz", "application/apply-patch+yaml", obj)
		// Not found is the resource's (its Details name no object) until
		// the CRD is served.
		if d := a.status().Details; a.code == http.StatusNotFound && (d == nil || d.Name != "x") {
			return fmt.Errorf("%s not served yet: %s", plural, a.body)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a CRD the server accepted: %v", err)
	}
	if !applyTypedPatchError(a) {
		check(t, a)
	}
	check(t, fx.do(t, http.MethodGet, collection, "", nil))
	// The OpenAPI v3 document of the group is built from the schema after
	// the CRD is served; until then the path is 404 with no body, as
	// kube-openapi's handler answers on kube-apiserver.
	openapi := "/openapi/v3/apis/" + schemaGroup + "/v1"
	err = retry.Until(ctx, func(context.Context) error {
		if a = fx.do(t, http.MethodGet, openapi, "", nil); a.code == http.StatusNotFound {
			return fmt.Errorf("%s: not found", openapi)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a CRD the server serves: %v", err)
	}
	check(t, a)
}
