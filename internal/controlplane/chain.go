package controlplane

// The server's handler chain: k8s.io/apiserver's filters, in the order of
// its DefaultBuildHandlerChain, less what no client of kubeembed can
// observe.

import (
	"net/http"

	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/filters/impersonation"
	genericfeatures "k8s.io/apiserver/pkg/features"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	flowcontrolrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
)

// handlerChain builds the aggregator's (the server's outermost) handler
// chain around h: the filters of k8s.io/apiserver's DefaultBuildHandlerChain
// in its order and with its configuration, except
//   - the filter latency trackers (filterlatency.TrackStarted and
//     TrackCompleted around each filter) and WithTracing: they feed
//     OpenTelemetry spans, which kubeembed exports nowhere, and the
//     apiserver_request_filter_duration_seconds histogram of the
//     process-wide registry, which its /metrics does not serve; together
//     they were a fifth of a GET's time in process (BENCHMARKS.md);
//   - WithTimeoutForNonLongRunningRequests, replaced by withTimeout, which
//     answers the same without a goroutine per request;
//   - the filters DefaultBuildHandlerChain leaves out with kubeembed's
//     configuration anyway (CORS, HSTS, goaway, retry-after, watch
//     termination at shutdown; WithRoutine's feature is off).
//
// muxComplete is closed once every tier has installed its routes and
// discovery (see signalMuxComplete): until then a 404 is a 503, as with the
// lifecycle signal kube-apiserver gives the same filter.
func handlerChain(h http.Handler, c *genericapiserver.Config, muxComplete <-chan struct{}) http.Handler {
	h = authorizedChain(h, c)
	h = genericapifilters.WithWarningRecorder(h)
	h = withTimeout(h, c.LongRunningFunc)
	h = genericapifilters.WithRequestDeadline(h, c.AuditBackend, c.AuditPolicyRuleEvaluator,
		c.LongRunningFunc, c.Serializer, c.RequestTimeout)
	h = genericfilters.WithWaitGroup(h, c.LongRunningFunc, c.NonLongRunningRequestWaitGroup)
	h = genericapifilters.WithCacheControl(h)
	h = genericfilters.WithHTTPLogging(h)
	h = genericapifilters.WithLatencyTrackers(h)
	h = genericapifilters.WithRequestInfo(h, c.RequestInfoResolver)
	h = genericapifilters.WithRequestReceivedTimestamp(h)
	h = genericapifilters.WithMuxAndDiscoveryComplete(h, muxComplete)
	h = genericfilters.WithPanicRecovery(h, c.RequestInfoResolver)
	return genericapifilters.WithAuditInit(h)
}

// authorizedChain is the inner part of the chain, from authentication to
// authorization: who the request is, its audit, impersonation, its
// priority level's seat (or the max-in-flight limit without priority and
// fairness) and whether it may.
func authorizedChain(h http.Handler, c *genericapiserver.Config) http.Handler {
	h = genericapifilters.WithAuthorization(h, c.Authorization.Authorizer, c.Serializer)
	if c.FlowControl != nil {
		estimator := flowcontrolrequest.NewWorkEstimator(c.StorageObjectCountTracker.Get,
			c.FlowControl.GetInterestedWatchCount, flowcontrolrequest.DefaultWorkEstimatorConfig(), c.FlowControl.GetMaxSeats)
		h = genericfilters.WithPriorityAndFairness(h, c.LongRunningFunc, c.FlowControl, estimator, c.RequestTimeout/4)
	} else {
		h = genericfilters.WithMaxInFlightLimit(h, c.MaxRequestsInFlight, c.MaxMutatingRequestsInFlight, c.LongRunningFunc)
	}
	if c.FeatureGate.Enabled(genericfeatures.ConstrainedImpersonation) {
		h = impersonation.WithConstrainedImpersonation(h, c.Authorization.Authorizer, c.Serializer)
	} else {
		h = impersonation.WithImpersonation(h, c.Authorization.Authorizer, c.Serializer)
	}
	h = genericapifilters.WithAudit(h, c.AuditBackend, c.AuditPolicyRuleEvaluator, c.LongRunningFunc)
	failed := genericapifilters.WithFailedAuthenticationAudit(genericapifilters.Unauthorized(c.Serializer),
		c.AuditBackend, c.AuditPolicyRuleEvaluator)
	return genericapifilters.WithAuthentication(h, c.Authentication.Authenticator, failed,
		c.Authentication.APIAudiences, c.Authentication.RequestHeaderConfig)
}

// signalMuxComplete closes done once every signal of s (its delegates'
// included) has fired, unless stop ends first: kube-apiserver's run signals
// MuxAndDiscoveryComplete so.
func signalMuxComplete(s *genericapiserver.GenericAPIServer, done chan struct{}, stop <-chan struct{}) {
	for _, signal := range s.MuxAndDiscoveryCompleteSignals() {
		select {
		case <-signal:
		case <-stop:
			return
		}
	}
	close(done)
}
