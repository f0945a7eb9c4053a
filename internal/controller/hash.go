package controller

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/dump"
)

// ComputeHash is upstream's controller.ComputeHash, the pod template hash
// of Deployments' ReplicaSets and DaemonSets' revisions: fnv32a over the
// template's dump (k8s.io/utils/dump.ForHash), the collision count
// appended, as a safe string. Names built from it are a cluster's names
// for the same k8s.io/api version.
func ComputeHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}
