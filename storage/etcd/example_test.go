package etcd_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kubeembed/apiserver/storage/etcd"
)

// New connects to an etcd cluster of your own and checks it within
// DialTimeout; here nothing listens, and the error says why.
func ExampleNew() {
	_, err := etcd.New(context.Background(), etcd.Options{
		Servers:     []string{"http://127.0.0.1:1"},
		Prefix:      "/team-a", // servers with different prefixes share a cluster
		DialTimeout: 200 * time.Millisecond,
	})
	fmt.Println(strings.Contains(err.Error(), "etcd [http://127.0.0.1:1] did not answer within 200ms"),
		strings.Contains(err.Error(), "connection refused"))
	// Output: true true
}
