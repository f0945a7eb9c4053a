// Package metricsapi serves metrics.k8s.io/v1beta1 for a kubeembed server
// as metrics-server serves it in a cluster: an aggregated API behind the
// Service kube-system/metrics-server and the APIService
// v1beta1.metrics.k8s.io, so that kubectl top, the metrics clientset
// (k8s.io/metrics) and the HPA controller read it through the API server.
//
// Nothing runs in a kubeembed server to be measured, so the values come
// from a Source: RequestsAsUsage (the default, and the CLI's --metrics)
// simulates usage from the pods' requests; apiservertest.ServeMetrics
// serves values a test sets.
//
//	m, err := metricsapi.Serve(ctx, srv, metricsapi.Options{})
//	...
//	defer m.Close() // before srv.Close
//
// Serve runs no goroutine but the handler's server; a Source is asked per
// request.
package metricsapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1ac "k8s.io/kube-aggregator/pkg/client/applyconfiguration/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/internal/localservice"
	"github.com/kubeembed/apiserver/internal/retry"
)

// The names metrics-server is deployed under, which clients do not need
// but a reader of the cluster expects.
const (
	// Namespace and ServiceName name the Service the APIService names.
	Namespace   = metav1.NamespaceSystem
	ServiceName = "metrics-server"
	// APIServiceName is the APIService registered.
	APIServiceName = "v1beta1.metrics.k8s.io"
)

// Options configure Serve; the zero value serves the simulation.
type Options struct {
	// Source gives the values; default: RequestsAsUsage of the server's
	// admin client.
	Source Source
	// Logger receives net/http's errors of the handler's server (a TLS
	// handshake that fails), at warn level; default: none.
	Logger *zap.Logger
}

// Server is metrics.k8s.io served for one API server, until Close.
type Server struct {
	admin      kubernetes.Interface
	aggregator aggregatorclient.Interface
	svc        *localservice.Service

	closeOnce sync.Once
	closeErr  error
}

// Serve serves metrics.k8s.io for srv, a started server, and returns once
// the APIService is Available (the aggregator has checked the Service, as
// it checks metrics-server) and the aggregator proxies it (it learns that
// through its informer), or with ctx's error. An APIService or
// EndpointSlice left by a process that did not Close (a cluster on disk)
// is taken over. On error nothing is left serving or registered.
func Serve(ctx context.Context, srv *apiserver.Server, opts Options) (_ *Server, err error) {
	admin, err := srv.Clientset()
	if err != nil {
		return nil, fmt.Errorf("metrics.k8s.io: %w", err)
	}
	agg, err := aggregatorclient.NewForConfig(srv.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("metrics.k8s.io: %w", err)
	}
	src := opts.Source
	if src == nil {
		src = RequestsAsUsage(admin)
	}
	logger := zap.NewNop()
	if opts.Logger != nil {
		logger = opts.Logger
	}
	stdLog, err := zap.NewStdLogAt(logger.Named("metrics-server"), zap.WarnLevel)
	if err != nil {
		return nil, err
	}
	svc, err := localservice.Serve(ctx, admin, Namespace, ServiceName, Handler(admin, src), stdLog)
	if err != nil {
		return nil, fmt.Errorf("metrics.k8s.io: %w", err)
	}
	s := &Server{admin: admin, aggregator: agg, svc: svc}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("metrics.k8s.io: %w", err), s.Close())
		}
	}()
	if err := s.register(ctx); err != nil {
		return nil, err
	}
	if err := s.waitServed(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// register applies the APIService with the handler's CA.
func (s *Server) register(ctx context.Context) error {
	svc := apiregistrationv1ac.APIService(APIServiceName).WithSpec(apiregistrationv1ac.APIServiceSpec().
		WithGroup("metrics.k8s.io").WithVersion("v1beta1").WithCABundle(s.svc.CABundle...).
		WithService(apiregistrationv1ac.ServiceReference().WithNamespace(Namespace).WithName(ServiceName)).
		// metrics-server's own manifest's priorities.
		WithGroupPriorityMinimum(100).WithVersionPriority(100))
	_, err := s.aggregator.ApiregistrationV1().APIServices().Apply(ctx, svc, metav1.ApplyOptions{FieldManager: localservice.FieldManager, Force: true})
	return err
}

// waitServed waits until the APIService is Available, then until the
// aggregator's discovery serves the group version.
func (s *Server) waitServed(ctx context.Context) error {
	err := retry.Until(ctx, func(ctx context.Context) error {
		svc, err := s.aggregator.ApiregistrationV1().APIServices().Get(ctx, APIServiceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range svc.Status.Conditions {
			if c.Type == apiregistrationv1.Available && c.Status == apiregistrationv1.ConditionTrue {
				return nil
			}
			if c.Type == apiregistrationv1.Available {
				return fmt.Errorf("APIService %s is not Available: %s: %s", APIServiceName, c.Reason, c.Message)
			}
		}
		return fmt.Errorf("APIService %s has no Available condition yet", APIServiceName)
	})
	if err != nil {
		return err
	}
	return retry.Until(ctx, func(context.Context) error {
		_, err := s.admin.Discovery().ServerResourcesForGroupVersion(version)
		return err
	})
}

// closeTimeout bounds Close's requests to the API server and its wait
// for the handler's requests in flight.
const closeTimeout = 5 * time.Second

// Close stops serving, in order: it deletes the APIService, so that the
// aggregator stops checking and proxying to the handler (a check that
// finds it gone would log an error); deletes the EndpointSlice, and the
// Service if Serve created it, so that a cluster kept on disk does not
// name a port nothing serves; then stops the handler, waiting up to 5 s
// for requests in flight, and returns once its goroutine has. Call it
// before the API server's Close; it is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		err := s.aggregator.ApiregistrationV1().APIServices().Delete(ctx, APIServiceName, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		s.closeErr = errors.Join(err, s.svc.Unpublish(ctx), s.svc.Close(ctx))
	})
	return s.closeErr
}
