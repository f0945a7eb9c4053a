package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// RBAC objects as an operator creates them for its operands: stored,
// defaulted and validated (not enforced yet).
func TestRBACObjects(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	r := clientset(t, srv).RbacV1()
	ctx := t.Context()

	_, err := r.Roles("default").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	b, err := r.RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:    rbacv1.RoleRef{Kind: "Role", Name: "reader"},
		Subjects: []rbacv1.Subject{
			{Kind: "User", Name: "jane"},
			{Kind: "ServiceAccount", Name: "default", Namespace: "default"},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, rbacv1.GroupName, b.RoleRef.APIGroup, "roleRef.apiGroup is defaulted")
	assert.Equal(t, rbacv1.GroupName, b.Subjects[0].APIGroup, "a user's apiGroup is defaulted")
	assert.Equal(t, "", b.Subjects[1].APIGroup)

	b.RoleRef.Name = "writer"
	_, err = r.RoleBindings("default").Update(ctx, b, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "roleRef change: %v", err)
	assert.Contains(t, err.Error(), "cannot change roleRef")

	_, err = r.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:bad"},
		Rules:      []rbacv1.PolicyRule{{Resources: []string{"pods"}}},
	}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "rule without verbs and apiGroups: %v", err)
	var fields []string
	for _, c := range statusOf(t, err).Details.Causes {
		fields = append(fields, c.Field)
	}
	assert.ElementsMatch(t, []string{"rules[0].verbs", "rules[0].apiGroups"}, fields)

	_, err = r.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "x"},
		RoleRef:    rbacv1.RoleRef{Kind: "Role", Name: "reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default"}},
	}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "cluster binding to a Role, SA without namespace: %v", err)
	fields = nil
	for _, c := range statusOf(t, err).Details.Causes {
		fields = append(fields, c.Field)
	}
	assert.ElementsMatch(t, []string{"roleRef.kind", "subjects[0].namespace"}, fields)
}
