package timing_test

import (
	"fmt"
	"log"
	"os"

	"github.com/kubeembed/apiserver/timing"
)

// ExampleShake chooses a shaken timing the way a CI job would: from an
// environment variable, a fixed seed to replay a failure, or none to have
// the server pick one (reported by Server.Timing and logged at Start).
func ExampleShake() {
	p, err := timing.Parse(os.Getenv("EXAMPLE_TIMING")) // e.g. "shake:42"; unset: off
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Enabled())

	p = timing.Shake(42)
	fmt.Println(p, p.Validate())
	// Output:
	// false
	// shake:42 <nil>
}

// ExampleEtcd is kube-apiserver on etcd's timing, to confirm that a suite
// failing on kubeembed fails because kubeembed is faster.
func ExampleEtcd() {
	p := timing.Etcd()
	fmt.Println(p.Enabled(), len(p.Write) > 0, len(p.Watch) > 0)
	// Output:
	// true true true
}
