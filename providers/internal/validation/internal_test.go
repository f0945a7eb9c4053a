package validation

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// As kube-apiserver v1.37.2 answers (parity's validation/pdb-both-min-and-max
// and reviews/sar-both-attributes).
func TestAsInternal(t *testing.T) {
	t.Parallel()
	spec := policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromString("10%"))}
	err := field.Invalid(field.NewPath("spec"), AsInternal(spec), "minAvailable and maxUnavailable cannot be both set")
	assert.Equal(t, `spec: Invalid value: {"MinAvailable":1,"Selector":null,"MaxUnavailable":"10%","UnhealthyPodEvictionPolicy":null}: `+
		`minAvailable and maxUnavailable cannot be both set`, err.Error())
	data, jerr := json.Marshal(AsInternal(&authorizationv1.NonResourceAttributes{Path: "/", Verb: "get"}))
	require.NoError(t, jerr)
	assert.Equal(t, `{"Path":"/","Verb":"get"}`, string(data))
	data, jerr = json.Marshal(AsInternal((*authorizationv1.NonResourceAttributes)(nil)))
	require.NoError(t, jerr)
	assert.Equal(t, `null`, string(data))
}
