package runner

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Kind is a resource for which the standard CRUD scenarios are generated:
// create, list (and as a Table), update, merge and JSON patches, delete,
// dry-run, server-side apply, an invalid name, generateName and a watch
// replayed from a resource version. A file lists them under "kinds".
type Kind struct {
	// Name is the resource, as in the path ("deployments").
	Name string `json:"name"`
	// Path is the collection's path, with {ns} when namespaced.
	Path string `json:"path"`
	// Object is a minimal valid object; its metadata.name and a label
	// parity={id} (which lists and watches select on) are set here.
	Object map[string]any `json:"object"`
	// Skip names operations not generated, each with the reason.
	Skip map[string]string `json:"skip,omitempty"`
	// Ignore is added to every step (see Step.Ignore).
	Ignore []string `json:"ignore,omitempty"`
}

// Ops are the generated operations, in order.
var Ops = []string{"create", "list", "update", "merge-patch", "json-patch", "delete", "dry-run", "apply", "invalid-name", "generate-name", "watch"}

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// Scenarios expands the kind into one scenario per operation.
func (k Kind) Scenarios() ([]Scenario, error) {
	if k.Name == "" || !strings.HasPrefix(k.Path, "/") || k.Object == nil {
		return nil, fmt.Errorf("kind %q: name, path and object are required", k.Name)
	}
	for op := range k.Skip {
		if !slices.Contains(Ops, op) {
			return nil, fmt.Errorf("kind %q: skip %q is not an operation (%s)", k.Name, op, strings.Join(Ops, ", "))
		}
	}
	obj := func(name string, labels map[string]any) map[string]any {
		o := deepCopy(k.Object)
		meta, _ := o["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			o["metadata"] = meta
		}
		l := map[string]any{"parity": "{id}"}
		for key, v := range labels {
			l[key] = v
		}
		meta["labels"] = l
		if strings.HasSuffix(name, "-") {
			meta["generateName"] = name
		} else {
			meta["name"] = name
		}
		return o
	}
	a, b := "{id}-a", "{id}-b"
	item := k.Path + "/" + a
	sel := map[string]string{"labelSelector": "parity={id}"}
	create := func(name, step string) Step {
		return Step{Name: step, Verb: "POST", Path: k.Path, Body: obj(name, nil)}
	}
	get := Step{Verb: "GET", Path: item}
	updated := obj(a, map[string]any{"x": "y"})
	updated["metadata"].(map[string]any)["resourceVersion"] = "{rv:ca}"

	steps := map[string][]Step{
		"create": {create(a, "ca"), get},
		"list": {create(a, "ca"), create(b, "cb"),
			{Verb: "GET", Path: k.Path, Query: sel},
			{Verb: "GET", Path: k.Path, Query: sel, Accept: tableAccept}},
		"update": {create(a, "ca"), {Verb: "PUT", Path: item, Body: updated}, get},
		"merge-patch": {create(a, "ca"),
			{Verb: "PATCH", Path: item, Body: map[string]any{"metadata": map[string]any{"labels": map[string]any{"x": "y"}}}}},
		"json-patch": {create(a, "ca"),
			{Verb: "PATCH", Path: item, ContentType: "application/json-patch+json",
				Body: []any{map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]any{"x": "y"}}}}},
		"delete":  {create(a, "ca"), {Verb: "DELETE", Path: item}, get},
		"dry-run": {{Verb: "POST", Path: k.Path, Query: map[string]string{"dryRun": "All"}, Body: obj(a, nil)}, get},
		"apply": {
			{Verb: "PATCH", Path: item, Query: map[string]string{"fieldManager": "parity"}, ContentType: "application/apply-patch+yaml", Body: obj(a, nil)},
			{Verb: "PATCH", Path: item, Query: map[string]string{"fieldManager": "parity"}, ContentType: "application/apply-patch+yaml", Body: obj(a, map[string]any{"x": "y"})},
		},
		"invalid-name":  {{Verb: "POST", Path: k.Path, Body: obj("{id}_Bad", nil)}},
		"generate-name": {{Verb: "POST", Path: k.Path, Body: obj("{id}-", nil)}},
		"watch": {create(a, "ca"), create(b, "cb"),
			{Verb: "PATCH", Path: item, Body: map[string]any{"metadata": map[string]any{"labels": map[string]any{"x": "y"}}}},
			{Verb: "WATCH", Path: k.Path, Query: map[string]string{"labelSelector": "parity={id}", "resourceVersion": "{rv:ca}"}, Events: 2}},
	}
	var out []Scenario
	for _, op := range Ops {
		if _, skip := k.Skip[op]; skip {
			continue
		}
		st := steps[op]
		for i := range st {
			st[i].Ignore = append(st[i].Ignore, k.Ignore...)
		}
		out = append(out, Scenario{Name: k.Name + "/" + op, Steps: st})
	}
	return out, nil
}

func deepCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}
