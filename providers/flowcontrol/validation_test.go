package flowcontrol_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	flowcontrolv1client "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// The messages of apimachinery's name checks.
const (
	subdomainMsg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', " +
		"and must start and end with an alphanumeric character (e.g. 'example.com', " +
		`regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
	labelMsg = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', " +
		"and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', " +
		"regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	verbList = `supported values: "create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"`
	iffMsg   = "must be 'Exempt' if and only if `name` is 'exempt'"
)

func required(f, msg string) metav1.StatusCause {
	return metav1.StatusCause{Type: metav1.CauseTypeFieldValueRequired, Field: f, Message: msg}
}

func invalid(f, msg string) metav1.StatusCause {
	return metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: f, Message: msg}
}

func unsupported(f, msg string) metav1.StatusCause {
	return metav1.StatusCause{Type: metav1.CauseTypeFieldValueNotSupported, Field: f, Message: msg}
}

func forbidden(f, msg string) metav1.StatusCause {
	return metav1.StatusCause{Type: metav1.CauseTypeForbidden, Field: f, Message: msg}
}

// flowcontrolClient starts a server and returns its flowcontrol client.
func flowcontrolClient(t *testing.T) flowcontrolv1client.FlowcontrolV1Interface {
	t.Helper()
	srv := apiservertest.Start(t)
	c, err := srv.Clientset()
	require.NoError(t, err)
	return c.FlowcontrolV1()
}

// create POSTs obj (YAML) to resource and returns the error.
func create(t *testing.T, fc flowcontrolv1client.FlowcontrolV1Interface, resource, obj string) error {
	t.Helper()
	body, err := yaml.YAMLToJSON([]byte(obj))
	require.NoError(t, err)
	return fc.RESTClient().Post().Resource(resource).SetHeader("Content-Type", "application/json").
		Body(body).Do(t.Context()).Error()
}

// assertInvalid asserts err is a 422 Invalid with the causes want.
func assertInvalid(t *testing.T, err error, want []metav1.StatusCause) {
	t.Helper()
	require.Error(t, err)
	require.True(t, apierrors.IsInvalid(err), "a 422: %v", err)
	st := err.(apierrors.APIStatus).Status()
	require.NotNil(t, st.Details)
	assert.Equal(t, want, st.Details.Causes)
}

type invalidCase struct {
	name, obj string
	want      []metav1.StatusCause
}

const lr, q = "spec.limited.limitResponse", "spec.limited.limitResponse.queuing"

// invalidLevels are priority levels kube-apiserver refuses, and why.
var invalidLevels = []invalidCase{
	{"limit response type empty", `{metadata: {name: lr-type}, spec: {type: Limited, limited: {limitResponse: {type: ""}}}}`,
		[]metav1.StatusCause{required(lr+".type", "Required value")}},
	{"hand size over queues", `{metadata: {name: hand}, spec: {type: Limited, limited: {limitResponse: {type: Queue, queuing: {queues: 4, handSize: 8, queueLengthLimit: 10}}}}}`,
		[]metav1.StatusCause{invalid(q+".handSize", "Invalid value: 8: should not be greater than queues (4)")}},
	{"queuing not positive", `{metadata: {name: negative}, spec: {type: Limited, limited: {limitResponse: {type: Queue, queuing: {queues: -1, handSize: -2, queueLengthLimit: -3}}}}}`,
		[]metav1.StatusCause{invalid(q+".queueLengthLimit", "Invalid value: -3: must be positive"),
			invalid(q+".queues", "Invalid value: -1: must be positive"), invalid(q+".handSize", "Invalid value: -2: must be positive")}},
	{"too many queues", `{metadata: {name: many}, spec: {type: Limited, limited: {limitResponse: {type: Queue, queuing: {queues: 10000001, handSize: 2}}}}}`,
		[]metav1.StatusCause{invalid(q+".queues", "Invalid value: 10000001: must not be greater than 10000000")}},
	{"hand needs too much entropy", `{metadata: {name: entropy}, spec: {type: Limited, limited: {limitResponse: {type: Queue, queuing: {queues: 128, handSize: 9}}}}}`,
		[]metav1.StatusCause{invalid(q+".handSize", "Invalid value: 9: required entropy bits of deckSize 128 and handSize 9 should not be greater than 60")}},
	{"lendable percent over 100", `{metadata: {name: lend}, spec: {type: Limited, limited: {lendablePercent: 101, limitResponse: {type: Reject}}}}`,
		[]metav1.StatusCause{invalid("spec.limited.lendablePercent", "Invalid value: 101: must be between 0 and 100, inclusive")}},
	{"lendable percent negative", `{metadata: {name: lend}, spec: {type: Limited, limited: {lendablePercent: -1, limitResponse: {type: Reject}}}}`,
		[]metav1.StatusCause{invalid("spec.limited.lendablePercent", "Invalid value: -1: must be between 0 and 100, inclusive")}},
	{"borrowing limit negative", `{metadata: {name: borrow}, spec: {type: Limited, limited: {borrowingLimitPercent: -1, limitResponse: {type: Reject}}}}`,
		[]metav1.StatusCause{invalid("spec.limited.borrowingLimitPercent", "Invalid value: -1: if specified, must be a non-negative integer")}},
	{"shares negative", `{metadata: {name: shares}, spec: {type: Limited, limited: {nominalConcurrencyShares: -1, limitResponse: {type: Reject}}}}`,
		[]metav1.StatusCause{invalid("spec.limited.nominalConcurrencyShares", "Invalid value: -1: must be a non-negative integer")}},
	{"queue without queuing", `{metadata: {name: no-queuing}, spec: {type: Limited, limited: {limitResponse: {type: Queue}}}}`,
		[]metav1.StatusCause{required("spec.limited.limitResponse.queuing", "Required value")}},
	{"reject with queuing", `{metadata: {name: reject}, spec: {type: Limited, limited: {limitResponse: {type: Reject, queuing: {queues: 4}}}}}`,
		[]metav1.StatusCause{forbidden(q, "Forbidden")}},
	{"limit response type unknown", `{metadata: {name: drop}, spec: {type: Limited, limited: {limitResponse: {type: Drop}}}}`,
		[]metav1.StatusCause{unsupported(lr+".type", `Unsupported value: "Drop": supported values: "Queue", "Reject"`)}},
	// The declarative errors come after the hand-written ones.
	{"declarative errors last", `{metadata: {name: last}, spec: {type: Limited, limited: {lendablePercent: 200, limitResponse: {type: ""}}}}`,
		[]metav1.StatusCause{invalid("spec.limited.lendablePercent", "Invalid value: 200: must be between 0 and 100, inclusive"),
			required(lr+".type", "Required value")}},
	{"type exempt for another name", `{metadata: {name: not-exempt}, spec: {type: Exempt}}`,
		[]metav1.StatusCause{invalid("spec.type", `Invalid value: "Exempt": `+iffMsg)}},
	{"type exempt with limited", `{metadata: {name: exempt-limited}, spec: {type: Exempt, limited: {limitResponse: {type: Reject}}}}`,
		[]metav1.StatusCause{invalid("spec.type", `Invalid value: "Exempt": `+iffMsg), forbidden("spec.limited", "Forbidden")}},
	{"exempt shares", `{metadata: {name: exempt-shares}, spec: {type: Exempt, exempt: {nominalConcurrencyShares: -1, lendablePercent: 101}}}`,
		[]metav1.StatusCause{invalid("spec.type", `Invalid value: "Exempt": `+iffMsg),
			invalid("spec.exempt.nominalConcurrencyShares", "Invalid value: -1: must be a non-negative integer"),
			invalid("spec.exempt.lendablePercent", "Invalid value: 101: must be between 0 and 100, inclusive")}},
	{"exempt with type limited", `{metadata: {name: exempt}, spec: {type: Limited, limited: {limitResponse: {type: Reject}}}}`,
		[]metav1.StatusCause{invalid("spec.type", `Invalid value: "Limited": `+iffMsg),
			invalid("spec", `Invalid value: {"Type":"Limited","Limited":{"NominalConcurrencyShares":30,"LimitResponse":{"Type":"Reject","Queuing":null},`+
				`"LendablePercent":0,"BorrowingLimitPercent":null},"Exempt":null}: spec of 'exempt' except the 'spec.exempt' field must equal the fixed value`)}},
	{"catch-all is fixed", `{metadata: {name: catch-all}, spec: {type: Limited, limited: {nominalConcurrencyShares: 5,
			limitResponse: {type: Queue, queuing: {queues: 4, handSize: 2, queueLengthLimit: 10}}}}}`,
		[]metav1.StatusCause{invalid("spec", `Invalid value: {"Type":"Limited","Limited":{"NominalConcurrencyShares":5,"LimitResponse":{"Type":"Queue",`+
			`"Queuing":{"Queues":4,"HandSize":2,"QueueLengthLimit":10}},"LendablePercent":0,"BorrowingLimitPercent":null},"Exempt":null}: `+
			`spec of 'catch-all' must equal the fixed value`)}},
	{"type missing", `{metadata: {name: no-type}, spec: {}}`, []metav1.StatusCause{required("spec.type", "Required value")}},
	{"type unknown", `{metadata: {name: sometimes}, spec: {type: Sometimes}}`,
		[]metav1.StatusCause{unsupported("spec.type", `Unsupported value: "Sometimes": supported values: "Exempt", "Limited"`)}},
	{"limited missing", `{metadata: {name: no-limited}, spec: {type: Limited}}`, []metav1.StatusCause{required("spec.limited", "Required value")}},
	{"limited with exempt", `{metadata: {name: both}, spec: {type: Limited, limited: {limitResponse: {type: Reject}}, exempt: {}}}`,
		[]metav1.StatusCause{forbidden("spec.exempt", "Forbidden")}},
	// Declaratively, exempt is forbidden under any type but Exempt.
	{"exempt without a type", `{metadata: {name: untyped}, spec: {exempt: {}}}`,
		[]metav1.StatusCause{forbidden("spec.exempt", "Forbidden"), required("spec.type", "Required value")}},
	{"v1beta3 annotation", `{metadata: {name: annotated, annotations: {flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares: "true"}},
			spec: {type: Limited, limited: {limitResponse: {type: Reject}}}}`,
		[]metav1.StatusCause{forbidden("metadata.annotations", "Forbidden: annotation 'flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares' is forbidden")}},
}

func TestPriorityLevelValidation(t *testing.T) {
	t.Parallel()
	fc := flowcontrolClient(t)
	for _, tc := range invalidLevels {
		t.Run(tc.name, func(t *testing.T) {
			assertInvalid(t, create(t, fc, "prioritylevelconfigurations", tc.obj), tc.want)
		})
	}
}

const (
	subjects, rr, nrr = "spec.rules[0].subjects", "spec.rules[0].resourceRules", "spec.rules[0].nonResourceRules"
	rule              = `subjects: [{kind: User, user: {name: u}}], resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods], namespaces: ["*"]}]`
)

// invalidSchemas are flow schemas kube-apiserver refuses, and why.
var invalidSchemas = []invalidCase{
	{"precedence negative", `{metadata: {name: negative}, spec: {priorityLevelConfiguration: {name: global-default}, matchingPrecedence: -1}}`,
		[]metav1.StatusCause{invalid("spec.matchingPrecedence", "Invalid value: -1: must be a positive value")}},
	{"precedence over the maximum", `{metadata: {name: over}, spec: {priorityLevelConfiguration: {name: global-default}, matchingPrecedence: 10001}}`,
		[]metav1.StatusCause{invalid("spec.matchingPrecedence", "Invalid value: 10001: must not be greater than 10000")}},
	{"precedence 1 for another name", `{metadata: {name: first}, spec: {priorityLevelConfiguration: {name: global-default}, matchingPrecedence: 1}}`,
		[]metav1.StatusCause{invalid("spec.matchingPrecedence", "Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1")}},
	{"distinguisher method unknown", `{metadata: {name: by-group}, spec: {priorityLevelConfiguration: {name: global-default}, distinguisherMethod: {type: ByGroup}}}`,
		[]metav1.StatusCause{unsupported("spec.distinguisherMethod.type", `Unsupported value: {"Type":"ByGroup"}: supported values: "ByNamespace", "ByUser"`)}},
	{"priority level name invalid", `{metadata: {name: bad-level}, spec: {priorityLevelConfiguration: {name: Bad_Level}}}`,
		[]metav1.StatusCause{invalid("spec.priorityLevelConfiguration.name", `Invalid value: "Bad_Level": `+subdomainMsg)}},
	{"priority level missing", `{metadata: {name: no-level}, spec: {}}`,
		[]metav1.StatusCause{required("spec.priorityLevelConfiguration.name", "Required value: must reference a priority level")}},
	{"subject kind empty", `{metadata: {name: no-kind}, spec: {priorityLevelConfiguration: {name: global-default}, rules: [{subjects: [{kind: ""}],
			nonResourceRules: [{verbs: [get], nonResourceURLs: [/healthz]}]}]}}`,
		[]metav1.StatusCause{unsupported(subjects+"[0].kind", `Unsupported value: "": supported values: "Group", "ServiceAccount", "User"`)}},
	{"subject members", `{metadata: {name: members}, spec: {priorityLevelConfiguration: {name: global-default}, rules: [{subjects: [
			{kind: User, group: {name: g}}, {kind: ServiceAccount, serviceAccount: {name: "", namespace: ""}, user: {name: u}}, {kind: Group},
			{kind: ServiceAccount, serviceAccount: {name: Bad_SA, namespace: Bad_NS}}, {kind: ServiceAccount, serviceAccount: {name: "*", namespace: ns}}],
			nonResourceRules: [{verbs: [get], nonResourceURLs: [/healthz]}]}]}}`,
		[]metav1.StatusCause{
			required(subjects+"[0].user", "Required value: user is required when subject kind is 'User'"),
			forbidden(subjects+"[0].group", "Forbidden: group is forbidden when subject kind is not 'Group'"),
			required(subjects+"[1].serviceAccount.name", "Required value"),
			required(subjects+"[1].serviceAccount.namespace", "Required value: must specify namespace for service account"),
			forbidden(subjects+"[1].user", "Forbidden: user is forbidden when subject kind is not 'User'"),
			required(subjects+"[2].group", "Required value: group is required when subject kind is 'Group'"),
			invalid(subjects+"[3].serviceAccount.name", `Invalid value: "Bad_SA": `+subdomainMsg),
			invalid(subjects+"[3].serviceAccount.namespace", `Invalid value: "Bad_NS": `+labelMsg),
		}},
	{"rule empty", `{metadata: {name: empty-rule}, spec: {priorityLevelConfiguration: {name: global-default}, rules: [{}]}}`,
		[]metav1.StatusCause{required(subjects, "Required value: subjects must contain at least one value"),
			required("spec.rules[0]", "Required value: at least one of resourceRules and nonResourceRules has to be non-empty")}},
	{"verbs", `{metadata: {name: verbs}, spec: {priorityLevelConfiguration: {name: global-default}, rules: [{subjects: [{kind: User, user: {name: u}}],
			resourceRules: [{verbs: [get, fetch], apiGroups: [""], resources: [pods], namespaces: ["*"]},
				{verbs: ["*", get], apiGroups: [""], resources: [pods], namespaces: ["*"]}, {verbs: [], apiGroups: [""], resources: [pods], namespaces: ["*"]}],
			nonResourceRules: [{verbs: [post], nonResourceURLs: [/healthz]}]}]}}`,
		[]metav1.StatusCause{
			unsupported(rr+"[0].verbs", `Unsupported value: ["get","fetch"]: `+verbList),
			invalid(rr+"[1].verbs", `Invalid value: ["*","get"]: if '*' is present, must not specify other verbs`),
			required(rr+"[2].verbs", "Required value: verbs must contain at least one value"),
			unsupported(nrr+"[0].verbs", `Unsupported value: ["post"]: `+verbList),
		}},
	{"resources", `{metadata: {name: resources}, spec: {priorityLevelConfiguration: {name: global-default}, rules: [{subjects: [{kind: User, user: {name: u}}],
			resourceRules: [{verbs: [get], apiGroups: ["*", apps], resources: ["*", pods], namespaces: ["*", default]},
				{verbs: [get], apiGroups: [], resources: [], namespaces: []},
				{verbs: [get], apiGroups: [""], resources: [pods], namespaces: [default, Bad_NS]},
				{verbs: [get], apiGroups: [""], resources: [nodes], clusterScope: true}]}]}}`,
		[]metav1.StatusCause{
			invalid(rr+"[0].apiGroups", `Invalid value: ["*","apps"]: if '*' is present, must not specify other api groups`),
			invalid(rr+"[0].resources", `Invalid value: ["*","pods"]: if '*' is present, must not specify other resources`),
			invalid(rr+"[0].namespaces", `Invalid value: ["*","default"]: if '*' is present, must not specify other namespaces`),
			required(rr+"[1].apiGroups", "Required value: resource rules must supply at least one api group"),
			required(rr+"[1].resources", "Required value: resource rules must supply at least one resource"),
			required(rr+"[1].namespaces", "Required value: resource rules that are not cluster scoped must supply at least one namespace"),
			invalid(rr+"[2].namespaces[1]", `Invalid value: "Bad_NS": each member of this list must be '*' or a DNS-1123 label; `+labelMsg),
		}},
	{"non-resource URLs", `{metadata: {name: urls}, spec: {priorityLevelConfiguration: {name: global-default}, rules: [{subjects: [{kind: User, user: {name: u}}],
			nonResourceRules: [{verbs: [get], nonResourceURLs: [healthz, "/a b", "//x", "/x*", "/a/*/b", "", "/", "/ok/*"]},
				{verbs: [get], nonResourceURLs: ["*", /healthz]}, {verbs: [get], nonResourceURLs: []}]}]}}`,
		[]metav1.StatusCause{
			invalid(nrr+"[0].nonResourceURLs[0]", `Invalid value: "healthz": must start with slash`),
			invalid(nrr+"[0].nonResourceURLs[1]", `Invalid value: "/a b": must not contain white-space`),
			invalid(nrr+"[0].nonResourceURLs[2]", `Invalid value: "//x": must not contain double slash`),
			invalid(nrr+"[0].nonResourceURLs[3]", `Invalid value: "/x*": wildcard can only do suffix matching`),
			invalid(nrr+"[0].nonResourceURLs[4]", `Invalid value: "/a/*/b": wildcard can only do suffix matching`),
			invalid(nrr+"[0].nonResourceURLs[5]", `Invalid value: "": must not be empty`),
			invalid(nrr+"[1].nonResourceURLs", `Invalid value: ["*","/healthz"]: if '*' is present, must not specify other non-resource URLs`),
			required(nrr+"[2].nonResourceURLs", "Required value: nonResourceURLs must contain at least one value"),
		}},
	{"exempt is fixed", `{metadata: {name: exempt}, spec: {priorityLevelConfiguration: {name: exempt}}}`,
		[]metav1.StatusCause{invalid("spec", `Invalid value: {"PriorityLevelConfiguration":{"Name":"exempt"},"MatchingPrecedence":1000,`+
			`"DistinguisherMethod":null,"Rules":null}: spec of 'exempt' must equal the fixed value`)}},
	{"catch-all is fixed", `{metadata: {name: catch-all}, spec: {priorityLevelConfiguration: {name: catch-all}, matchingPrecedence: 10000,
			distinguisherMethod: {type: ByUser}, rules: [{subjects: [{kind: Group, group: {name: "system:unauthenticated"}}],
			resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}]}]}}`,
		[]metav1.StatusCause{invalid("spec", `Invalid value: {"PriorityLevelConfiguration":{"Name":"catch-all"},"MatchingPrecedence":10000,`+
			`"DistinguisherMethod":{"Type":"ByUser"},"Rules":[{"Subjects":[{"Kind":"Group","User":null,"Group":{"Name":"system:unauthenticated"},"ServiceAccount":null}],`+
			`"ResourceRules":[{"Verbs":["*"],"APIGroups":["*"],"Resources":["*"],"ClusterScope":true,"Namespaces":["*"]}],"NonResourceRules":null}]}: `+
			`spec of 'catch-all' must equal the fixed value`)}},
	{"valid rule, bad precedence", `{metadata: {name: valid-rule}, spec: {priorityLevelConfiguration: {name: global-default}, matchingPrecedence: -5, rules: [{` + rule + `}]}}`,
		[]metav1.StatusCause{invalid("spec.matchingPrecedence", "Invalid value: -5: must be a positive value")}},
}

func TestFlowSchemaValidation(t *testing.T) {
	t.Parallel()
	fc := flowcontrolClient(t)
	for _, tc := range invalidSchemas {
		t.Run(tc.name, func(t *testing.T) {
			assertInvalid(t, create(t, fc, "flowschemas", tc.obj), tc.want)
		})
	}
}

// The bootstrap configuration the server creates at start is valid, on
// an update too, and the mandatory objects may be written as they are
// (the exempt level's spec.exempt changed). The updates name no resource
// version: the server's own writes of status do not conflict.
func TestBootstrapConfigurationValidates(t *testing.T) {
	t.Parallel()
	fc := flowcontrolClient(t)
	dryRun := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, boot := range slices.Concat(bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations) {
		pl, err := fc.PriorityLevelConfigurations().Get(t.Context(), boot.Name, metav1.GetOptions{})
		require.NoError(t, err)
		pl.ResourceVersion = ""
		_, err = fc.PriorityLevelConfigurations().Update(t.Context(), pl, dryRun)
		assert.NoError(t, err, boot.Name)
	}
	for _, boot := range slices.Concat(bootstrap.MandatoryFlowSchemas, bootstrap.SuggestedFlowSchemas) {
		fs, err := fc.FlowSchemas().Get(t.Context(), boot.Name, metav1.GetOptions{})
		require.NoError(t, err)
		fs.ResourceVersion = ""
		_, err = fc.FlowSchemas().Update(t.Context(), fs, dryRun)
		assert.NoError(t, err, boot.Name)
	}
	_, err := fc.FlowSchemas().Create(t.Context(), bootstrap.MandatoryFlowSchemaExempt.DeepCopy(), metav1.CreateOptions{})
	assert.True(t, apierrors.IsAlreadyExists(err), "valid, and there already: %v", err)
	_, err = fc.PriorityLevelConfigurations().Create(t.Context(), bootstrap.MandatoryPriorityLevelConfigurationCatchAll.DeepCopy(), metav1.CreateOptions{})
	assert.True(t, apierrors.IsAlreadyExists(err), "valid, and there already: %v", err)

	exempt, err := fc.PriorityLevelConfigurations().Get(t.Context(), flowcontrolv1.PriorityLevelConfigurationNameExempt, metav1.GetOptions{})
	require.NoError(t, err)
	exempt.ResourceVersion = ""
	exempt.Spec.Exempt.NominalConcurrencyShares = ptr.To[int32](7)
	_, err = fc.PriorityLevelConfigurations().Update(t.Context(), exempt, dryRun)
	assert.NoError(t, err, "the exempt level's spec.exempt may change")
	exempt.Spec.Exempt.LendablePercent = ptr.To[int32](101)
	_, err = fc.PriorityLevelConfigurations().Update(t.Context(), exempt, dryRun)
	assertInvalid(t, err, []metav1.StatusCause{invalid("spec.exempt.lendablePercent", "Invalid value: 101: must be between 0 and 100, inclusive")})
}

// A write of /status checks the conditions: each has a type, no two the
// same.
func TestStatusValidation(t *testing.T) {
	t.Parallel()
	fc := flowcontrolClient(t)
	dryRun := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	duplicate := metav1.StatusCause{Type: metav1.CauseTypeFieldValueDuplicate, Field: "status.conditions[1].type", Message: `Duplicate value: "X"`}
	want := []metav1.StatusCause{duplicate, required("status.conditions[2].type", "Required value")}

	fs, err := fc.FlowSchemas().Get(t.Context(), "global-default", metav1.GetOptions{})
	require.NoError(t, err)
	fs.ResourceVersion = ""
	fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: "X"}, {Type: "X"}, {}}
	_, err = fc.FlowSchemas().UpdateStatus(t.Context(), fs, dryRun)
	assertInvalid(t, err, want)

	pl, err := fc.PriorityLevelConfigurations().Get(t.Context(), "global-default", metav1.GetOptions{})
	require.NoError(t, err)
	pl.ResourceVersion = ""
	pl.Status.Conditions = []flowcontrolv1.PriorityLevelConfigurationCondition{{Type: "X"}, {Type: "X"}, {}}
	_, err = fc.PriorityLevelConfigurations().UpdateStatus(t.Context(), pl, dryRun)
	assertInvalid(t, err, want)
}
