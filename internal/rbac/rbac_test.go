package rbac

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
)

func TestAllows(t *testing.T) {
	res := func(verb, group, resource, sub, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Name: name, ResourceRequest: true}
	}
	url := func(verb, path string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{Verb: verb, Path: path}
	}
	for _, tc := range []struct {
		name  string
		rule  rbacv1.PolicyRule
		attrs authorizer.AttributesRecord
		want  bool
	}{
		{"exact", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("get", "", "pods", "", ""), true},
		{"other verb", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("list", "", "pods", "", ""), false},
		{"other group", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"deployments"}}, res("get", "apps", "deployments", "", ""), false},
		{"wildcards", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, res("delete", "apps", "deployments", "scale", "x"), true},
		{"subresource needs naming", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("get", "", "pods", "log", ""), false},
		{"resource/sub", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}}, res("get", "", "pods", "log", ""), true},
		{"*/sub", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*/status"}}, res("get", "apps", "deployments", "status", ""), true},
		{"*/sub not the resource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*/status"}}, res("get", "apps", "deployments", "", ""), false},
		{"resource name", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}, res("get", "", "configmaps", "", "a"), true},
		{"other name", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}, res("get", "", "configmaps", "", "b"), false},
		{"names never match a list", rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}, res("list", "", "configmaps", "", ""), false},
		{"url", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}, url("get", "/healthz"), true},
		{"url prefix", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/*"}}, url("get", "/apis/apps/v1"), true},
		{"url prefix is not the parent", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/*"}}, url("get", "/apis"), false},
		{"resource rule is no url rule", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, url("get", "/healthz"), false},
	} {
		assert.Equal(t, tc.want, Allows(tc.attrs, &tc.rule), tc.name)
	}
}

func TestSubjects(t *testing.T) {
	sa := &user.DefaultInfo{Name: "system:serviceaccount:team:robot", Groups: []string{"system:serviceaccounts"}}
	assert.True(t, subjectIs(sa, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "robot"}, "team"), "a RoleBinding's namespace by default")
	assert.False(t, subjectIs(sa, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "robot"}, ""), "a ClusterRoleBinding names the namespace")
	assert.True(t, subjectIs(sa, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "system:serviceaccounts"}, ""))
	assert.False(t, subjectIs(sa, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "robot"}, "team"))
	d := describer{"RoleBinding", "rb/team", rbacv1.RoleRef{Kind: "Role", Name: "r"}, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "robot"}, "team"}
	assert.Equal(t, `RoleBinding "rb/team" of Role "r" to ServiceAccount "robot/team"`, d.String())
}

// BenchmarkAuthorize200Bindings is RBAC's decision for a user whose grant
// is one of 200 RoleBindings and 200 ClusterRoleBindings.
func BenchmarkAuthorize200Bindings(b *testing.B) {
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	roles, clusterRoles, bindings, clusterBindings := idx(), idx(), idx(), idx()
	_ = clusterRoles.Add(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}})
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "reader"}
	for i := range 200 {
		subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: fmt.Sprintf("user-%d", i)}}
		_ = bindings.Add(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprint("rb-", i)}, RoleRef: ref, Subjects: subject})
		_ = clusterBindings.Add(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("crb-", i)}, RoleRef: ref, Subjects: subject})
	}
	a := New(rbaclisters.NewRoleLister(roles), rbaclisters.NewClusterRoleLister(clusterRoles),
		rbaclisters.NewRoleBindingLister(bindings), rbaclisters.NewClusterRoleBindingLister(clusterBindings))
	attrs := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "user-199"}, Verb: "get", Namespace: "default",
		Resource: "configmaps", Name: "cm", ResourceRequest: true}
	for b.Loop() {
		if d, _, _ := a.Authorize(context.Background(), attrs); d != authorizer.DecisionAllow {
			b.Fatal("denied")
		}
	}
}
