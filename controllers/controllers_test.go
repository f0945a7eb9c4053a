package controllers_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kubeembed/apiserver/controllers"
)

func TestEnabledReadsListsAsKubeControllerManager(t *testing.T) {
	t.Parallel()
	all := controllers.All()
	for _, tc := range []struct {
		name string
		list []controllers.Name
		want []controllers.Name
	}{
		{"empty: none", []controllers.Name{}, nil},
		{"nil: none", nil, nil},
		{"star: all, in start order", []controllers.Name{"*"}, all},
		{"star minus one", []controllers.Name{"*", "-namespace"}, without(all, controllers.Namespace)},
		{"named ones, in start order", []controllers.Name{controllers.Namespace, controllers.GarbageCollector},
			[]controllers.Name{controllers.GarbageCollector, controllers.Namespace}},
		{"the first of name and -name decides", []controllers.Name{"namespace", "-namespace"}, []controllers.Name{controllers.Namespace}},
		{"the first of -name and name decides", []controllers.Name{"-namespace", "*", "namespace"}, without(all, controllers.Namespace)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := controllers.Enabled(tc.list)
			assert.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestEnabledReportsEveryUnknownName(t *testing.T) {
	t.Parallel()
	_, err := controllers.Enabled([]controllers.Name{"*", "nope", "-neither"})
	assert.ErrorContains(t, err, `unknown controller "nope"`)
	assert.ErrorContains(t, err, `unknown controller "-neither"`)
}

func without(list []controllers.Name, drop controllers.Name) []controllers.Name {
	var out []controllers.Name
	for _, n := range list {
		if n != drop {
			out = append(out, n)
		}
	}
	return out
}
