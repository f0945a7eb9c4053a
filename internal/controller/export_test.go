package controller

import "time"

// SetMissingGrace sets how long m waits for an established CRD's resource
// to be discovered. Call it before Run.
func SetMissingGrace(m *Monitors, d time.Duration) { m.missingGrace = d }
