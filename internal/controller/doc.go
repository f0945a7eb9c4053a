// Package controller is what the server's controllers (controllers/...)
// share so that Server.WaitIdle can tell when they have nothing left to do:
// a work queue that knows whether it is empty and idle (Queue), what each
// controller's event handlers have seen (Observer), and the metadata
// informers of every resource that can be collected (Monitors). The
// revision of the last write to each resource comes from internal/writes,
// fed by the storage seam.
//
// A controller is idle when, for every resource it watches, its handlers
// have seen the last write made to that resource before the check (or its
// informer started listing after that write), and every queue is empty,
// has no item in a worker and no item waiting to be retried after an error.
// Items a controller put off on purpose (AddAfter: waiting for someone
// else's finalizer, a grace period) do not count.
package controller
