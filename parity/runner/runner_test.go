package runner

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v), s)
	return v
}

func cidr(t *testing.T) *net.IPNet {
	_, n, err := net.ParseCIDR(ServiceCIDR)
	require.NoError(t, err)
	return n
}

// Two servers answering the same requests with different uids, resource
// versions, times, generated names and allocations normalise to the same.
func TestNormaliseMakesEquivalentResponsesEqual(t *testing.T) {
	real := []Response{
		{Code: 201, Body: jsonValue(t, `{"metadata":{"name":"web-x7k2p","generateName":"web-","uid":"0b6c5e2a-1111-4c2b-9d2e-1a2b3c4d5e6f","resourceVersion":"1200","creationTimestamp":"2026-11-29T10:00:00Z"},
			"spec":{"clusterIP":"10.0.0.17","clusterIPs":["10.0.0.17"],"ports":[{"port":80,"nodePort":31000}]}}`)},
		{Code: 200, Body: jsonValue(t, `{"metadata":{"name":"child","resourceVersion":"1350","ownerReferences":[{"name":"web-x7k2p","uid":"0b6c5e2a-1111-4c2b-9d2e-1a2b3c4d5e6f"}]}}`)},
		{Code: 409, Body: jsonValue(t, `{"kind":"Status","message":"Operation cannot be fulfilled on x \"web-x7k2p\": precondition uid 0b6c5e2a-1111-4c2b-9d2e-1a2b3c4d5e6f, rv 1350"}`)},
	}
	ours := []Response{
		{Code: 201, Body: jsonValue(t, `{"metadata":{"name":"web-ab12c","generateName":"web-","uid":"9f9f9f9f-2222-4c2b-9d2e-1a2b3c4d5e6f","resourceVersion":"307","creationTimestamp":"2026-11-29T11:22:33Z"},
			"spec":{"clusterIP":"10.0.0.201","clusterIPs":["10.0.0.201"],"ports":[{"port":80,"nodePort":32111}]}}`)},
		{Code: 200, Body: jsonValue(t, `{"metadata":{"name":"child","resourceVersion":"309","ownerReferences":[{"name":"web-ab12c","uid":"9f9f9f9f-2222-4c2b-9d2e-1a2b3c4d5e6f"}]}}`)},
		{Code: 409, Body: jsonValue(t, `{"kind":"Status","message":"Operation cannot be fulfilled on x \"web-ab12c\": precondition uid 9f9f9f9f-2222-4c2b-9d2e-1a2b3c4d5e6f, rv 309"}`)},
	}
	a, b := NormaliseAll(cidr(t), real), NormaliseAll(cidr(t), ours)
	assert.Empty(t, cmp.Diff(a, b))
	meta := a[0].Body.(map[string]any)["metadata"].(map[string]any)
	assert.Equal(t, "web-<gen-1>", meta["name"])
	assert.Equal(t, "<uid-1>", meta["uid"])
	assert.Equal(t, "<rv-1>", meta["resourceVersion"])
	assert.Equal(t, "<time>", meta["creationTimestamp"])
	assert.Contains(t, a[2].Body.(map[string]any)["message"], "rv <rv-2>")
}

// A generated name that happens to occur inside a random uid (db-1 in
// 1df6b6db-13a0-...) leaves the uid whole.
func TestNormaliseUidsBeforeGeneratedNames(t *testing.T) {
	got := NormaliseAll(cidr(t), []Response{
		{Code: 201, Body: jsonValue(t, `{"metadata":{"name":"db-1","generateName":"db-","uid":"0b6c5e2a-1111-4c2b-9d2e-1a2b3c4d5e6f"}}`)},
		{Code: 200, Body: jsonValue(t, `{"metadata":{"name":"e","uid":"1df6b6db-13a0-4815-a14e-c1a44b3a4826"}}`)},
	})
	assert.Equal(t, "<uid-2>", got[1].Body.(map[string]any)["metadata"].(map[string]any)["uid"])
}

// A number after a colon in a message is a port, not a resource version
// that happens to have its value.
func TestNormaliseKeepsPortsThatLookLikeVersions(t *testing.T) {
	got := NormaliseAll(cidr(t), []Response{
		{Code: 200, Body: jsonValue(t, `{"metadata":{"name":"a","resourceVersion":"443"}}`)},
		{Code: 500, Body: jsonValue(t, `{"kind":"Status","message":"Post \"https://empty.ns.svc:443/validate\": rv 443"}`)},
	})
	assert.Equal(t, `Post "https://empty.ns.svc:443/validate": rv <rv-1>`, got[1].Body.(map[string]any)["message"])
}

// Normalisation must not hide real differences.
func TestNormaliseKeepsDifferences(t *testing.T) {
	for name, pair := range map[string][2]string{
		"order of resource versions": {
			`[{"metadata":{"resourceVersion":"5"}},{"metadata":{"resourceVersion":"309"}}]`,
			`[{"metadata":{"resourceVersion":"309"}},{"metadata":{"resourceVersion":"5"}}]`},
		"same uid vs two uids": {
			`[{"metadata":{"uid":"0b6c5e2a-1111-4c2b-9d2e-1a2b3c4d5e6f"}},{"metadata":{"uid":"0b6c5e2a-1111-4c2b-9d2e-1a2b3c4d5e6f"}}]`,
			`[{"metadata":{"uid":"0b6c5e2a-1111-4c2b-9d2e-1a2b3c4d5e6f"}},{"metadata":{"uid":"1b6c5e2a-1111-4c2b-9d2e-1a2b3c4d5e6f"}}]`},
		"IP outside the service range": {
			`[{"spec":{"clusterIP":"10.0.0.5"}}]`, `[{"spec":{"clusterIP":"10.1.0.5"}}]`},
		"node port outside the range": {
			`[{"spec":{"ports":[{"nodePort":30001}]}}]`, `[{"spec":{"ports":[{"nodePort":80}]}}]`},
		"a name that is not generated": {
			`[{"metadata":{"name":"a"}}]`, `[{"metadata":{"name":"b"}}]`},
		"a missing timestamp": {
			`[{"metadata":{"creationTimestamp":"2026-11-29T10:00:00Z"}}]`, `[{"metadata":{}}]`},
	} {
		t.Run(name, func(t *testing.T) {
			var ra, rb []Response
			for _, v := range jsonValue(t, pair[0]).([]any) {
				ra = append(ra, Response{Code: 200, Body: v})
			}
			for _, v := range jsonValue(t, pair[1]).([]any) {
				rb = append(rb, Response{Code: 200, Body: v})
			}
			assert.NotEmpty(t, cmp.Diff(NormaliseAll(cidr(t), ra), NormaliseAll(cidr(t), rb)))
		})
	}
}

func TestNormaliseTableAgeAndTokenVolume(t *testing.T) {
	table := func(age, vol string) []Response {
		return []Response{{Code: 200, Body: jsonValue(t, `{"kind":"Table","columnDefinitions":[{"name":"Name"},{"name":"Age"}],
			"rows":[{"cells":["a","`+age+`"]}]}`)},
			{Code: 200, Body: jsonValue(t, `{"spec":{"volumes":[{"name":"`+vol+`"}]},"metadata":{"managedFields":[{"fieldsV1":{"f:spec":{"f:volumes":{"k:{\"name\":\"`+vol+`\"}":{}}}}}]}}`)}}
	}
	a := NormaliseAll(cidr(t), table("3s", "kube-api-access-abcde"))
	b := NormaliseAll(cidr(t), table("1m", "kube-api-access-zz9x2"))
	assert.Empty(t, cmp.Diff(a, b))
}

func TestDiffStepIgnoreAndStatusOnly(t *testing.T) {
	ref := Response{Code: 422, Headers: map[string][]string{"Content-Type": {"application/json"}},
		Body: jsonValue(t, `{"kind":"Status","reason":"Invalid","message":"one","status":{"x":1}}`)}
	cand := Response{Code: 422, Headers: map[string][]string{"Content-Type": {"application/json"}},
		Body: jsonValue(t, `{"kind":"Status","reason":"Invalid","message":"two","status":{"x":2}}`)}
	assert.NotEmpty(t, diffStep(Step{}, ref, cand))
	assert.Empty(t, diffStep(Step{StatusOnly: true}, ref, cand))
	assert.Empty(t, diffStep(Step{Ignore: []string{"message", "status.x"}}, ref, cand))
	cand.Code = 400
	assert.NotEmpty(t, diffStep(Step{StatusOnly: true}, ref, cand))
}

func TestKindExpandsToEveryOperation(t *testing.T) {
	k := Kind{Name: "configmaps", Path: "/api/v1/namespaces/{ns}/configmaps",
		Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}, Skip: map[string]string{"watch": "why"}}
	got, err := k.Scenarios()
	require.NoError(t, err)
	require.Len(t, got, len(Ops)-1)
	for _, s := range got {
		s.Area = "a"
		require.NoError(t, s.validate(), s.Name)
	}
	// The object given is never changed by the expansion.
	assert.Nil(t, k.Object["metadata"])

	_, err = Kind{Name: "x", Path: "/x", Object: map[string]any{}, Skip: map[string]string{"nope": ""}}.Scenarios()
	assert.ErrorContains(t, err, `skip "nope" is not an operation`)
}

func TestLoadReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	write("a.yaml", `
scenarios:
- name: ok
  steps: [{verb: GET, path: /api}]
- name: bad-verb
  steps: [{verb: FETCH, path: /api}]
- name: bad-ref
  steps: [{verb: GET, path: "/api/{rv:later}"}, {name: later, verb: GET, path: /api}]
- name: ok
  steps: [{verb: GET, path: /apis}]
`)
	write("b.yaml", "scenarios: [{name: x, unknownField: 1}]")
	_, err := Load(dir, nil)
	require.Error(t, err)
	for _, want := range []string{`verb "FETCH"`, `no earlier step named "later"`, `"a/ok" already defined`, "unknown field"} {
		assert.ErrorContains(t, err, want)
	}

	write("b.yaml", "area: b\nscenarios: [{name: x, steps: [{verb: GET, path: /version}]}]")
	write("a.yaml", "scenarios: [{name: y, steps: [{verb: GET, path: /version}]}]")
	got, err := Load(dir, regexp.MustCompile(`^b/`))
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "b/x", got[0].FullName())
	assert.True(t, strings.HasPrefix(got[0].ID(""), "p-"))
}

// The committed scenarios load, and there are at least 300 of them.
func TestScenariosLoad(t *testing.T) {
	all, err := Load("../scenarios", nil)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(all), 300)
}

func TestDiffStepSortLines(t *testing.T) {
	ref := Response{Code: 200, Body: "[+]ping ok\n[+]etcd ok\nhealthz check passed\n"}
	reordered := Response{Code: 200, Body: "[+]etcd ok\n[+]ping ok\nhealthz check passed\n"}
	missing := Response{Code: 200, Body: "[+]ping ok\nhealthz check passed\n"}
	assert.NotEmpty(t, diffStep(Step{}, ref, reordered), "order counts by default")
	assert.Empty(t, diffStep(Step{SortLines: true}, ref, reordered))
	assert.Contains(t, diffStep(Step{SortLines: true}, ref, missing), "etcd", "a missing line is a difference")
}

// KUBELET steps are checked when the file loads: only in cluster files,
// with a known action on a node or pod path.
func TestLoadChecksKubeletSteps(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(`
cluster: true
scenarios:
- name: ok
  steps: [{verb: KUBELET, path: /namespaces/a/pods/b, action: exit, container: c, code: 1}, {verb: KUBELET, path: /nodes/n, action: stop}]
- name: bad-path
  steps: [{verb: KUBELET, path: /pods/b, action: exit}]
- name: bad-action
  steps: [{verb: KUBELET, path: /nodes/n, action: exit}]
- name: action-on-get
  steps: [{verb: GET, path: /api, action: stop}]
`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(`
scenarios: [{name: not-a-cluster, steps: [{verb: KUBELET, path: /nodes/n, action: stop}]}]
`), 0o600))
	_, err := Load(dir, nil)
	require.Error(t, err)
	for _, want := range []string{`KUBELET path "/pods/b"`, `KUBELET action "exit" on a node`,
		"action, container and code are for KUBELET steps", "KUBELET steps are for the scenarios of a cluster file"} {
		assert.ErrorContains(t, err, want)
	}
	assert.NotContains(t, err.Error(), "c/ok")
}

// In a cluster's scenarios, what depends on when concurrent writers ran
// (resource versions, the order of managed fields, the endpoint
// controllers' trigger times and slice generations) is not compared; the
// endpoints themselves are.
func TestNormaliseConcurrent(t *testing.T) {
	slice := func(rv, gen, trigger, ip string) []Response {
		ann, fann := "", ""
		if trigger != "" {
			ann = `"annotations":{"endpoints.kubernetes.io/last-change-trigger-time":"` + trigger + `"},`
			fann = `"f:annotations":{".":{},"f:endpoints.kubernetes.io/last-change-trigger-time":{}},`
		}
		return []Response{{Code: 200, Body: jsonValue(t, `{"items":[{"addressType":"IPv4","endpoints":[{"addresses":["`+ip+`"]}],
			"metadata":{`+ann+`"generation":`+gen+`,"resourceVersion":"`+rv+`","managedFields":[
			{"manager":"b","fieldsV1":{"f:metadata":{`+fann+`"f:labels":{}}}},{"manager":"a"}]}}],"metadata":{"resourceVersion":"9"}}`)}}
	}
	norm := func(r []Response) []Response { return Normalise(&Normaliser{Concurrent: true}, r) }
	a := norm(slice("5", "2", "2026-12-01T10:00:00Z", "10.244.0.2"))
	assert.Empty(t, cmp.Diff(a, norm(slice("70", "3", "", "10.244.0.2"))))
	assert.NotEmpty(t, cmp.Diff(a, norm(slice("70", "3", "", "10.244.0.3"))))
	two := func(first, second string) []Response {
		return norm([]Response{{Code: 200, Body: jsonValue(t, `{"addressType":"IPv4","metadata":{},"endpoints":[{"addresses":["`+first+`"]},{"addresses":["`+second+`"]}]}`)}})
	}
	assert.Empty(t, cmp.Diff(two("10.244.0.2", "10.244.1.2"), two("10.244.1.2", "10.244.0.2")), "endpoints in any order")
	item := a[0].Body.(map[string]any)["items"].([]any)[0].(map[string]any)
	mf := item["metadata"].(map[string]any)["managedFields"].([]any)
	assert.Equal(t, "a", mf[0].(map[string]any)["manager"], "managed fields sorted by manager")
	assert.Equal(t, map[string]any{"f:labels": map[string]any{}}, getPath(mf[1], "fieldsV1", "f:metadata"))
	// Without Concurrent, they are compared.
	assert.NotEmpty(t, cmp.Diff(NormaliseAll(nil, slice("5", "2", "2026-12-01T10:00:00Z", "10.244.0.2")),
		NormaliseAll(nil, slice("5", "3", "", "10.244.0.2"))))
}

// Concurrent recorders' events are compared in any order.
func TestNormaliseConcurrentEvents(t *testing.T) {
	list := func(first, second string) []Response {
		return Normalise(&Normaliser{Concurrent: true}, []Response{{Code: 200, Body: jsonValue(t,
			`{"kind":"EventList","items":[{"reason":"`+first+`","message":"m"},{"reason":"`+second+`","message":"m"}]}`)}})
	}
	assert.Empty(t, cmp.Diff(list("Scheduled", "Pulling"), list("Pulling", "Scheduled")))
	assert.NotEmpty(t, cmp.Diff(list("Scheduled", "Pulling"), list("Pulling", "Pulled")))
}

// A difference a scenario explains still counts as different; the report
// says why next to its diff and counts the explained ones.
func TestReportPrintsWhyAScenarioDiffers(t *testing.T) {
	t.Parallel()
	step := Step{Verb: "GET", Path: "/x"}
	results := []Result{
		{Scenario: Scenario{Area: "a", Name: "same"}, Steps: []StepResult{{Step: step}}},
		{Scenario: Scenario{Area: "a", Name: "explained", File: "a.yaml", Differs: "the reference cannot publish a loopback address"},
			Steps: []StepResult{{Step: step, Diff: "-404\n+200"}}},
		{Scenario: Scenario{Area: "a", Name: "unexplained", File: "a.yaml"}, Steps: []StepResult{{Step: step, Diff: "-1\n+2"}}},
	}
	var b strings.Builder
	require.NoError(t, WriteReport(&b, "", results))
	report := b.String()
	assert.Contains(t, report, "**1 identical, 2 different: 33.3% of 3 scenarios.** 1 of the differences are explained")
	assert.Contains(t, report, "### a/explained\n\n(a.yaml)\n\nWhy: the reference cannot publish a loopback address\n\nstep 1: GET /x")
	assert.NotContains(t, report[strings.Index(report, "### a/unexplained"):], "Why:")
}

// An Until step matches the body in the server's field order (as kubectl
// prints it) as well as with sorted keys; UntilAbsent wants the text in
// neither.
func TestSettledMatchesTheServersFieldOrder(t *testing.T) {
	t.Parallel()
	raw := `{"status":{"observedGeneration":2,"updatedNumberScheduled":1,"numberAvailable":1}}`
	r := Response{Code: 200, Body: jsonValue(t, raw), Raw: raw}
	assert.True(t, settled(Step{UntilContains: `"updatedNumberScheduled":1,"numberAvailable":1`}, r))
	assert.True(t, settled(Step{UntilContains: `"numberAvailable":1,"observedGeneration":2`}, r), "sorted")
	assert.False(t, settled(Step{UntilContains: `"numberAvailable":2`}, r))
	assert.False(t, settled(Step{UntilAbsent: `"updatedNumberScheduled":1,"numberAvailable"`}, r))
	assert.True(t, settled(Step{UntilAbsent: `deletionTimestamp`}, r))
}

// A /metrics answer is compared as the type and label names of the named
// families: values, label values, sample order and other families are the
// server's own.
func TestMetricFamilies(t *testing.T) {
	const ref = `# HELP apiserver_flowcontrol_dispatched_requests_total [BETA] Number of requests executed by API Priority and Fairness subsystem
# TYPE apiserver_flowcontrol_dispatched_requests_total counter
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 12
apiserver_flowcontrol_dispatched_requests_total{flow_schema="global-default",priority_level="global-default"} 3
# HELP apiserver_flowcontrol_request_wait_duration_seconds [BETA] Length of time a request spent waiting in its queue
# TYPE apiserver_flowcontrol_request_wait_duration_seconds histogram
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="global-default",priority_level="global-default",le="0"} 0
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="global-default",priority_level="global-default",le="+Inf"} 3
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="global-default",priority_level="global-default"} 0.001
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="global-default",priority_level="global-default"} 3
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7e+09
`
	const other = `# TYPE apiserver_flowcontrol_dispatched_requests_total counter
apiserver_flowcontrol_dispatched_requests_total{priority_level="workload-low",flow_schema="service-accounts"} 7
# TYPE apiserver_flowcontrol_request_wait_duration_seconds histogram
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="false",flow_schema="a",priority_level="b",le="+Inf"} 1
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="false",flow_schema="a",priority_level="b"} 0
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="false",flow_schema="a",priority_level="b"} 1
`
	names := []string{"apiserver_flowcontrol_dispatched_requests_total", "apiserver_flowcontrol_request_wait_duration_seconds",
		"apiserver_flowcontrol_rejected_requests_total"}
	got, err := metricFamilies(ref, names)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"apiserver_flowcontrol_dispatched_requests_total":     map[string]any{"type": "counter", "labels": []any{"flow_schema", "priority_level"}},
		"apiserver_flowcontrol_request_wait_duration_seconds": map[string]any{"type": "histogram", "labels": []any{"execute", "flow_schema", "priority_level"}},
	}, got, "le is the buckets'; a family without samples and one not named are left out")
	same, err := metricFamilies(other, names)
	require.NoError(t, err)
	assert.Equal(t, got, same, "values, label values and their order are each server's")

	missing, err := metricFamilies(strings.Replace(other, `execute="false",`, "", 3), names)
	require.NoError(t, err)
	assert.NotEqual(t, got, missing, "a missing label is a difference")
	_, err = metricFamilies("not metrics {", names)
	assert.Error(t, err)
}

// A step's user and groups take the placeholders too: "{id}-u" is the
// user a scenario's binding names, not a user of that literal name.
func TestRequestImpersonatesWithPlaceholders(t *testing.T) {
	t.Parallel()
	target := &Target{URL: "https://127.0.0.1:1", Token: "t"}
	st := Step{Verb: "GET", Path: "/api", User: "{id}-u", Groups: []string{"{id}-g", "system:authenticated"}}
	req, err := target.request(t.Context(), st, target.substituter("ns1", "p-1", nil))
	require.NoError(t, err)
	assert.Equal(t, "p-1-u", req.Header.Get("Impersonate-User"))
	assert.Equal(t, []string{"p-1-g", "system:authenticated"}, req.Header.Values("Impersonate-Group"))
}
