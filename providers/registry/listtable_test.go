package registry_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers/registry"
)

// ListOrder orders a listed table's rows and ListName names them from the
// whole list; one object's table and the list itself are left as they are.
func TestKindListTable(t *testing.T) {
	t.Parallel()
	kind := registry.Kind[*corev1.Secret]{
		GroupVersion: corev1.SchemeGroupVersion, Resource: "secrets", Singular: "secret", Namespaced: true,
		NewObj:    func() runtime.Object { return &corev1.Secret{} },
		NewList:   func() runtime.Object { return &corev1.SecretList{} },
		Columns:   []registry.Column{registry.ColumnOf("Type", "string", "", 0, func(s *corev1.Secret) any { return string(s.Type) })},
		ListOrder: func(a, b *corev1.Secret) int { return strings.Compare(string(a.Type), string(b.Type)) },
		// The last item of the list is marked.
		ListName: func(items []*corev1.Secret) func(*corev1.Secret) string {
			var last string
			if len(items) > 0 {
				last = items[len(items)-1].Name
			}
			return func(s *corev1.Secret) string {
				if s.Name == last {
					return s.Name + " (last)"
				}
				return s.Name
			}
		},
	}
	s, _ := storageOf(t, corev1.SchemeGroupVersion, corev1.AddToScheme, kind)
	tables := s["secrets"].(rest.TableConvertor)
	secret := func(name, typ string) corev1.Secret {
		return corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretType(typ)}
	}
	list := &corev1.SecretList{Items: []corev1.Secret{secret("a", "z"), secret("b", "m"), secret("c", "a")}}

	table, err := tables.ConvertToTable(t.Context(), list, nil)
	require.NoError(t, err)
	var rows [][]any
	for _, r := range table.Rows {
		rows = append(rows, r.Cells[:2])
	}
	assert.Equal(t, [][]any{{"c", "a"}, {"b", "m"}, {"a (last)", "z"}}, rows, "ordered by type; the last of the ordered items marked")
	assert.Equal(t, "a", list.Items[0].Name, "the list keeps its order")
	assert.Equal(t, "Name", table.ColumnDefinitions[0].Name)

	one := secret("a", "z")
	table, err = tables.ConvertToTable(t.Context(), &one, nil)
	require.NoError(t, err)
	assert.Equal(t, "a", table.Rows[0].Cells[0], "one object is not a list")
}
