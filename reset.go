package apiserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kubeembed/apiserver/internal/controlplane"
	"github.com/kubeembed/apiserver/storage"
)

// Reset puts the server back to snap, a Snapshot taken once Start returned
// (and, for a server with controllers, WaitIdle), so that it serves as a
// new server of the same Options would: what apiservertest does between
// the tests that share a server. In order, it
//   - cuts off the clients made before: in-process ones fail from now on
//     as after Close (inproc: transport closed); over the network, the
//     requests in flight end (a watch ends as when kube-apiserver ends it)
//     and idle connections stay open, as network clients of the same TLS
//     configuration share them through client-go's transport cache
//     (credentials stay valid: a network client can go on);
//   - drops the fault rules (Faults) and forgets the simulated kubelet's
//     test-made state (nodes added go, initial nodes removed, stopped or
//     made not Ready are back and Ready; container rules, logs and
//     handlers are dropped) and the controllers' event correlation;
//   - restores the storage to snap (Restore: CRDs, webhook configurations,
//     RBAC, namespaces and every other object);
//   - waits until the controllers are idle (WaitIdle), discovery serves the
//     custom resources of snap's CRDs and no other (none of a CRD the last
//     test deleted itself either), /openapi/v3 lists no group version only
//     such CRDs served, and admission's informers have seen the restore;
//     then forgets the recorded requests (Recorder).
//
// What a client can still tell from a new server: resourceVersions only
// grow (as after any restore), objects written at start carry the start's
// times (the identity Lease's renewTime until its next renewal, 10 s at
// most; the legacy token tracking ConfigMap's "since" date), /metrics
// counts every request since Start,
// the server's clock (Options.Clock) is where it was, the admission
// policy plugins stay built once a policy existed, and API Priority and
// Fairness counts the status writes of a FlowSchema's name in the last
// minute (it delays the write of one written more than 5 times, 30 to 75
// s, and WaitIdle waits for it). On an error (a closed
// server, a backend that cannot restore, a wait that ctx ends) the server
// is not to be reused: close it.
func (s *Server) Reset(ctx context.Context, snap storage.Snapshot) error {
	switch {
	case !s.started.Load():
		return errors.New("reset: the server is not started")
	case s.closed.Load():
		return errors.New("reset: the server is closed")
	}
	s.cutClients()
	s.faults.Reset()
	admin := s.InProcessRESTConfig()
	before, err := controlplane.CRDs(ctx, admin)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	s.cp.ResetControllers()
	if err := s.restoreSettled(ctx, snap); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	after, err := controlplane.CRDs(ctx, admin)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if err := s.cp.WaitCRDsServed(ctx, admin, before, after); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if err := s.cp.WaitAdmissionCaughtUp(ctx); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	s.recorder.Reset()
	return nil
}

// cutClients ends the requests and watches of every client made so far;
// clients made from now on are served by a new transport.
func (s *Server) cutClients() {
	fresh := controlplane.NewTransport()
	fresh.SetHandler(s.cp.Handler())
	s.clients.Swap(fresh).Cut()
	s.listener.EndRequests()
}

// maxRestoreRounds bounds restoreSettled.
const maxRestoreRounds = 5

// restoreSettled restores snap and waits for the controllers, until a
// restore finds nothing to change but heartbeats. The controllers see the
// restore's changes one by one (a ReplicaSet's pods gone before the
// ReplicaSet, an EndpointSlice before its Service) and may act on a state
// between two, creating what the restore deleted; the next round deletes
// that.
func (s *Server) restoreSettled(ctx context.Context, snap storage.Snapshot) error {
	r, ok := s.opts.storage.(storage.RestoreReporter)
	if !ok {
		return fmt.Errorf("storage backend %T cannot restore snapshots", s.opts.storage)
	}
	for round := 1; ; round++ {
		// Watches see the changes as events: no informer lists again.
		changed, err := r.RestoreReport(snap, true)
		if err != nil {
			return err
		}
		if err := s.cp.Restored(ctx, changed); err != nil {
			return err
		}
		if err := s.WaitIdle(ctx); err != nil {
			return err
		}
		switch {
		case onlyHeartbeats(changed):
			return nil
		case round == maxRestoreRounds:
			return fmt.Errorf("the controllers still changed %d keys after %d restores: %s", len(changed), round,
				strings.Join(slices.Sorted(maps.Keys(changed)), ", "))
		}
	}
}

// onlyHeartbeats reports whether the keys a restore changed are all
// Leases: what their holders renew on their own period (each node's
// kubelet, kube-apiserver's identity), whatever the controllers do. A
// round on a loaded machine can take longer than that period, and CI once
// saw every one of five rounds meet a renewal. The renewal a restore took
// back comes again.
func onlyHeartbeats(changed map[string]int64) bool {
	for key := range changed {
		if !strings.HasPrefix(key, leasesPrefix) {
			return false
		}
	}
	return true
}

// leasesPrefix is the storage keys' prefix of coordination.k8s.io Leases.
const leasesPrefix = "/registry/leases/"
