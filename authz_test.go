package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func createNamespace(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func bind(t *testing.T, c kubernetes.Interface, ns, name string, ref rbacv1.RoleRef, subjects ...rbacv1.Subject) {
	t.Helper()
	var err error
	if ns == "" {
		_, err = c.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subjects}, metav1.CreateOptions{})
	} else {
		_, err = c.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subjects}, metav1.CreateOptions{})
	}
	require.NoError(t, err)
}

func requireForbidden(t *testing.T, err error, msg string) {
	t.Helper()
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	assert.Equal(t, msg, err.Error())
}

// A Role bound in a namespace grants there only; a binding takes effect
// for the very next request; the deny message is kube-apiserver's.
func TestRBACRoleBinding(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	admin := clientset(t, srv)
	createNamespace(t, admin, "team")
	_, err := admin.RbacV1().Roles("team").Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	alice := apiservertest.ClientsetFor(t, srv, "alice")
	_, err = alice.CoreV1().Pods("team").List(t.Context(), metav1.ListOptions{})
	requireForbidden(t, err, `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "team"`)

	bind(t, admin, "team", "read-pods", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"})
	_, err = alice.CoreV1().Pods("team").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err, "the binding applies to the next request")
	_, err = alice.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	requireForbidden(t, err, `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default"`)
	_, err = alice.CoreV1().ConfigMaps("team").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	requireForbidden(t, err, `configmaps is forbidden: User "alice" cannot create resource "configmaps" in API group "" in the namespace "team"`)

	sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team", Verb: "watch", Resource: "pods"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.True(t, sar.Status.Allowed)
	assert.Equal(t, `RBAC: allowed by RoleBinding "read-pods/team" of Role "pod-reader" to User "alice"`, sar.Status.Reason)
}

// A ClusterRole bound by a RoleBinding grants in the binding's namespace; by
// a ClusterRoleBinding everywhere. Groups and service accounts are
// subjects; resource names and subresources narrow a rule.
func TestRBACClusterRoles(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	admin := clientset(t, srv)
	createNamespace(t, admin, "team")
	_, err := admin.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cm-one"},
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"one"}},
			{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*/status"}},
			{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"namespaces"}},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cm-one"}
	bind(t, admin, "team", "dev-cm", ref, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "dev"})
	createCM(t, admin, "team", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one"}})

	bob := apiservertest.ClientsetFor(t, srv, "bob", "dev")
	_, err = bob.CoreV1().ConfigMaps("team").Get(t.Context(), "one", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = bob.CoreV1().ConfigMaps("team").Get(t.Context(), "two", metav1.GetOptions{})
	requireForbidden(t, err, `configmaps "two" is forbidden: User "bob" cannot get resource "configmaps" in API group "" in the namespace "team"`)
	_, err = bob.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	requireForbidden(t, err, `namespaces is forbidden: User "bob" cannot list resource "namespaces" in API group "" at the cluster scope`)

	_, err = admin.CoreV1().ServiceAccounts("team").Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	bind(t, admin, "", "robot-cm", ref, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "robot", Namespace: "team"})
	robot := apiservertest.ClientsetForServiceAccount(t, srv, "team", "robot")
	_, err = robot.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err, "a ClusterRoleBinding grants cluster-wide")
	_, err = robot.CoreV1().Namespaces().Get(t.Context(), "team", metav1.GetOptions{})
	requireForbidden(t, err, `namespaces "team" is forbidden: User "system:serviceaccount:team:robot" cannot get resource "namespaces" in API group "" in the namespace "team"`)
}

// A binding to a role that does not exist grants nothing, and says so, as
// kube-apiserver does: its authorizer's name, then RBAC's reason.
func TestRBACMissingRole(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	admin := clientset(t, srv)
	bind(t, admin, "default", "ghostly", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "ghost"},
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "carol"})
	_, err := apiservertest.ClientsetFor(t, srv, "carol").CoreV1().Secrets("default").List(t.Context(), metav1.ListOptions{})
	requireForbidden(t, err, `secrets is forbidden: User "carol" cannot list resource "secrets" in API group "" in the namespace "default": rbac: RBAC: role.rbac.authorization.k8s.io "ghost" not found`)
}

// The server starts with kube-apiserver's bootstrap policy; the aggregation
// controller gives admin, edit and view their rules, and adds a custom
// role labelled for aggregation to them.
func TestRBACBootstrapPolicyAndAggregation(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	admin := clientset(t, srv)
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery", "system:public-info-viewer", "system:controller:namespace-controller"} {
		r, err := admin.RbacV1().ClusterRoles().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err, name)
		assert.Equal(t, "true", r.Annotations["rbac.authorization.kubernetes.io/autoupdate"], name)
	}
	_, err := admin.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widgets-view",
		Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	view, err := admin.RbacV1().ClusterRoles().Get(t.Context(), "view", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, view.Rules, rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}})
	var managers []string
	for _, f := range view.ManagedFields {
		managers = append(managers, f.Manager)
	}
	assert.ElementsMatch(t, []string{"kube-apiserver", "clusterrole-aggregation-controller"}, managers)

	bind(t, admin, "default", "viewers", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "viewers"})
	viewer := apiservertest.ClientsetFor(t, srv, "vic", "viewers")
	_, err = viewer.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err, "view lets list pods")
	_, err = viewer.CoreV1().Secrets("default").List(t.Context(), metav1.ListOptions{})
	requireForbidden(t, err, `secrets is forbidden: User "vic" cannot list resource "secrets" in API group "" in the namespace "default"`)
	_, err = viewer.Discovery().ServerGroups()
	require.NoError(t, err, "system:discovery lets every authenticated user discover")
}

// Impersonation is authorized by the impersonate verb, as kubectl --as
// needs it.
func TestRBACImpersonation(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	admin := clientset(t, srv)
	_, err := admin.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "be-bob"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"impersonate"}, APIGroups: []string{""}, Resources: []string{"users"}, ResourceNames: []string{"bob"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	bind(t, admin, "", "alice-be-bob", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "be-bob"},
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"})
	as := func(name string) kubernetes.Interface {
		cfg, err := srv.RESTConfigFor(&user.DefaultInfo{Name: "alice"})
		require.NoError(t, err)
		cfg.Impersonate.UserName = name
		c, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		return c
	}
	assert.Equal(t, "bob", whoAmI(t, as("bob")).Username)
	_, err = as("carol").AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	requireForbidden(t, err, `users "carol" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope`)
}

// A user may grant only what it holds: a role with more, or a binding to
// such a role, is refused with the rules it lacks, unless it may escalate
// or bind that role.
func TestRBACEscalationPrevention(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	admin := clientset(t, srv)
	_, err := admin.RbacV1().Roles("default").Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "rbac-writer"},
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"create", "update"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}},
			{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	bind(t, admin, "default", "alice-writes-rbac", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "rbac-writer"},
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"})
	alice := apiservertest.ClientsetFor(t, srv, "alice")

	_, err = alice.RbacV1().Roles("default").Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "held"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{})
	require.NoError(t, err, "a role with rules alice holds")
	_, err = alice.RbacV1().Roles("default").Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "more"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "delete"}, APIGroups: []string{""}, Resources: []string{"pods", "secrets"}}}}, metav1.CreateOptions{})
	requireForbidden(t, err, `roles.rbac.authorization.k8s.io "more" is forbidden: user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}
{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete"]}`)

	_, err = alice.RbacV1().RoleBindings("default").Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "to-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	assert.Contains(t, err.Error(), `rolebindings.rbac.authorization.k8s.io "to-admin" is forbidden: user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:`)

	_, err = admin.RbacV1().Roles("default").Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "binder"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"bind"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{"view"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	bind(t, admin, "default", "alice-binds-view", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "binder"},
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"})
	_, err = alice.RbacV1().RoleBindings("default").Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "to-view"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "bob"}}}, metav1.CreateOptions{})
	require.NoError(t, err, "the bind verb on view allows binding it")
}
