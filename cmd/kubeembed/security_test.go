package main

import (
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Everything the CLI writes is its user's only: the kubeconfig 0600
// (even one that existed readable by others: it holds the admin token),
// the data directory and every directory in it 0700, every file in it
// 0600 but the CA certificates, public as kubeadm writes them (0644), and
// the audit log 0600 (kube-apiserver's, through lumberjack, is 0600 too).
func TestCLIFilesArePrivate(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir, kc, audit := filepath.Join(root, "data"), filepath.Join(root, "kc"), filepath.Join(root, "audit.log")
	require.NoError(t, os.WriteFile(kc, nil, 0o644))
	policy := filepath.Join(root, "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Metadata}]\n"), 0o600))
	runUntilServing(t, "--data-dir", dir, "--kubeconfig", kc, "--nodes", "0",
		"--audit-policy-file", policy, "--audit-log-path", audit)
	for _, f := range []string{kc, audit} {
		st, err := os.Stat(f)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o600), st.Mode().Perm(), f)
	}
	files := 0
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		info, err := d.Info()
		require.NoError(t, err)
		switch {
		case d.IsDir():
			assert.Equal(t, fs.FileMode(0o700), info.Mode().Perm(), path)
		case strings.HasSuffix(path, ".crt"):
			assert.Equal(t, fs.FileMode(0o644), info.Mode().Perm(), path)
		default:
			files++
			assert.Equal(t, fs.FileMode(0o600), info.Mode().Perm(), path)
		}
		return nil
	}))
	assert.Greater(t, files, 5, "keys, token, port, etcd's files")
}

// --bind-address is loopback unless given (kube-apiserver's default is
// 0.0.0.0); another address serves but warns that the API is reachable
// from the network.
func TestCLIBindAddressWarns(t *testing.T) {
	t.Parallel()
	f, _, err := parseFlags(nil, &lockedBuffer{})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", f.bind)
	for bind, warns := range map[string]bool{"127.0.0.1": false, "0.0.0.0": true} {
		log := &lockedBuffer{}
		stop := runLogging(t, log, "--bind-address", bind, "--profile", "envtest", "--kubeconfig", filepath.Join(t.TempDir(), "kc"))
		stop()
		if warns {
			assert.Regexp(t, `WARN\s+serving beyond this machine`, log.String(), bind)
		} else {
			assert.NotContains(t, log.String(), "serving beyond this machine", bind)
		}
	}
}

// Nothing secret reaches the logs at debug level (-v), nor an audit log
// at level Metadata (kube-apiserver's audit levels: Metadata omits
// request and response bodies): not a Secret's data, a service account
// token the server issued, the admin token, or a bearer token it refused.
func TestCLINoSecretsInLogs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	kc, audit, policy := filepath.Join(root, "kc"), filepath.Join(root, "audit.log"), filepath.Join(root, "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Metadata}]\n"), 0o600))
	log := &lockedBuffer{}
	stop := runLogging(t, log, "-v", "--data-dir", filepath.Join(root, "data"), "--kubeconfig", kc, "--nodes", "0",
		"--audit-policy-file", policy, "--audit-log-path", audit)
	c, _ := clientsOf(t, kc)
	const secret = "s3cret-value-7d1f"
	_, err := c.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		StringData: map[string]string{"password": secret}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().Secrets("default").Get(t.Context(), "s", metav1.GetOptions{})
	require.NoError(t, err)
	tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(t.Context(), "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) { // the controller has not made it yet
		_, err = c.CoreV1().ServiceAccounts("default").Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err = c.CoreV1().ServiceAccounts("default").CreateToken(t.Context(), "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	}
	require.NoError(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	require.NoError(t, err)
	admin := cfg.BearerToken
	require.NotEmpty(t, admin)
	const refused = "refused-token-9c2e"
	cfg.BearerToken = refused
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	require.True(t, apierrors.IsUnauthorized(err), "%v", err)
	stop()

	auditLog, err := os.ReadFile(audit)
	require.NoError(t, err)
	require.Contains(t, string(auditLog), `"resource":"secrets"`, "the audit log has the Secret's requests")
	require.Contains(t, log.String(), "kube-apiserver ready", "the log was captured")
	for name, s := range map[string]string{"the Secret's data": secret, "its base64": base64.StdEncoding.EncodeToString([]byte(secret)),
		"the service account token": tr.Status.Token, "the admin token": admin, "a refused token": refused} {
		assert.NotContains(t, log.String(), s, "%s in the log", name)
		assert.NotContains(t, string(auditLog), s, "%s in the audit log", name)
	}
}
