package etcd

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
)

// tlsConfig is the client TLS of opts, nil for plain connections (the etcd
// client dials TLS only when it gets a configuration).
func tlsConfig(opts Options) (*tls.Config, error) {
	if opts.CAFile == "" && opts.CertFile == "" && opts.KeyFile == "" {
		return nil, nil
	}
	info := transport.TLSInfo{CertFile: opts.CertFile, KeyFile: opts.KeyFile, TrustedCAFile: opts.CAFile}
	c, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd client TLS: %w", err)
	}
	return c, nil
}

// layoutSample is how many keys under the prefix New looks at.
const layoutSample = 50

// storedMagic are the first bytes of every value a Kubernetes API server
// writes: protobuf, JSON, CBOR, or a value encrypted at rest.
var storedMagic = [][]byte{[]byte("k8s\x00"), []byte("{"), {0xd9, 0xd9, 0xf7}, []byte("k8s:enc:")}

// checkLayout refuses a prefix that holds keys a Kubernetes API server did
// not write: keys not of the form prefix/resource/.../name, or values in no
// encoding it writes. An empty prefix, or one a kube-apiserver or kubeembed
// wrote, passes.
func checkLayout(ctx context.Context, client *kubernetes.Client, opts Options) error {
	ctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	root := strings.TrimSuffix(opts.Prefix, "/")
	resp, err := client.KV.Get(ctx, root+"/", clientv3.WithPrefix(), clientv3.WithLimit(layoutSample))
	if err != nil {
		return fmt.Errorf("etcd: reading prefix %q: %w", opts.Prefix, err)
	}
	for _, kv := range resp.Kvs {
		if reason := foreign(root, string(kv.Key), kv.Value); reason != "" {
			return fmt.Errorf("etcd prefix %q holds a key no Kubernetes API server wrote (%q: %s); "+
				"give the server a prefix of its own", opts.Prefix, kv.Key, reason)
		}
	}
	return nil
}

// foreign says why a key under root is not one of a Kubernetes API
// server, or "".
func foreign(root, key string, value []byte) string {
	rest := strings.TrimPrefix(key, root+"/")
	if parts := strings.Split(rest, "/"); len(parts) < 2 || slices.Contains(parts, "") {
		return "not <prefix>/<resource>/[<namespace>/]<name>"
	}
	for _, m := range storedMagic {
		if bytes.HasPrefix(value, m) {
			return ""
		}
	}
	return "the value is not an encoded object"
}

// diagnose says why the servers cannot be reached, as far as a dial and a
// TLS handshake tell: the gRPC client only reports its deadline.
func diagnose(servers []string, tlsConfig *tls.Config) string {
	var reasons []string
	for _, s := range servers {
		u, err := url.Parse(s)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", s, err))
			continue
		}
		conn, err := net.DialTimeout("tcp", u.Host, time.Second)
		if err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		if u.Scheme == "https" && tlsConfig != nil {
			c := tlsConfig.Clone()
			c.ServerName = u.Hostname()
			tc := tls.Client(conn, c)
			_ = tc.SetDeadline(time.Now().Add(time.Second))
			if err := tc.Handshake(); err != nil {
				reasons = append(reasons, fmt.Sprintf("%s: %v", s, err))
			}
		}
		_ = conn.Close()
	}
	if len(reasons) == 0 {
		return ""
	}
	return " (" + strings.Join(reasons, "; ") + ")"
}
