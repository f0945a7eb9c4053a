// Package nodefeatures is the node declared features framework
// (NodeDeclaredFeatures, GA in v1.37) as kubeembed's simulated nodes and
// its API server use it: what a v1.37 kubelet declares in its node's
// status.declaredFeatures with its default feature gates, and the version
// the API server infers a pod's requirements for.
package nodefeatures

import (
	"slices"
	"sync"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/dranodeallocatableresources"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/draoptionalnodeoperations"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/extendwebsocketstokubelet"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/inplacepodresize"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/restartallcontainers"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/usernamespaceshostnetwork"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/volumebindmountoptions"
	"k8s.io/component-helpers/nodedeclaredfeatures/types"

	"github.com/kubeembed/apiserver/internal/version"
)

// kubeletGates are the v1.37.2 kubelet's defaults of the gates the
// framework's features read (pkg/features/kube_features.go).
var kubeletGates = types.FeatureGateMap{
	restartallcontainers.RestartAllContainersOnContainerExits:             true, // beta since 1.36
	inplacepodresize.IPPRPodLevelResourcesFeatureGate:                     true, // beta since 1.36
	extendwebsocketstokubelet.ExtendWebSocketsToKubeletFeatureGate:        true, // beta since 1.36
	inplacepodresize.IPPRInitContainersFeatureGate:                        true, // GA in 1.37
	inplacepodresize.IPPRMemoryBackedVolumesFeatureGate:                   false,
	usernamespaceshostnetwork.UserNamespacesHostNetworkSupportFeatureGate: false,
	dranodeallocatableresources.DRANodeAllocatableResourcesFeature:        false,
	volumebindmountoptions.VolumeBindMountOptionsFeatureGate:              false,
	draoptionalnodeoperations.DRAOptionalNodeOperationsFeatureGate:        false,
}

// Version is the Kubernetes version of the server and its kubelets
// (parsed once: the scheduler asks for each pod it tries).
var Version = sync.OnceValue(func() *utilversion.Version { return utilversion.MustParse(version.Kubernetes()) })

// declared is what Declared copies: the list is the same for every node.
var declared = sync.OnceValue(func() []string {
	return ndf.DefaultFramework.DiscoverNodeFeatures(&types.NodeConfiguration{FeatureGates: kubeletGates, Version: Version()})
})

// Declared are the features a v1.37 kubelet with its default gates
// declares, sorted by name as the kubelet lists them; a copy the caller
// may keep.
func Declared() []string { return slices.Clone(declared()) }
