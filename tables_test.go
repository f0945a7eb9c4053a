package apiserver_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// Helpers of the tests of the server's Tables (what kubectl get prints),
// which compare cells with what kube-apiserver v1.37's printers give.

// quietServer is a server whose objects only the test writes (envtest's
// profile: no controller, no node, no ServiceAccount admission), so a
// status the test writes stays as written.
func quietServer(t *testing.T) kubernetes.Interface {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Profile: apiserver.ProfileEnvtest}))
	return clientset(t, srv)
}

// table gets path (a collection or one object) as a Table, as kubectl get
// asks.
func table(t *testing.T, c kubernetes.Interface, path string) metav1.Table {
	t.Helper()
	raw, err := c.CoreV1().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(t.Context())
	require.NoError(t, err, "%s", raw)
	var out metav1.Table
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// tableCells gets path's Table and returns each row's cells by column name
// (wide columns included; a cell without a column, as IPAddresses' age,
// is left out).
func tableCells(t *testing.T, c kubernetes.Interface, path string) []map[string]any {
	t.Helper()
	tab := table(t, c, path)
	var out []map[string]any
	for _, r := range tab.Rows {
		row := map[string]any{}
		for i, col := range tab.ColumnDefinitions {
			if i < len(r.Cells) {
				row[col.Name] = r.Cells[i]
			}
		}
		out = append(out, row)
	}
	return out
}

// tableCell is the cell of column in the only row of path's Table.
func tableCell(t *testing.T, c kubernetes.Interface, path, column string) any {
	t.Helper()
	rows := tableCells(t, c, path)
	require.Len(t, rows, 1, "rows of %s", path)
	v, ok := rows[0][column]
	require.True(t, ok, "no column %q in %v", column, rows[0])
	return v
}
