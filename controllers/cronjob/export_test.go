package cronjob

import (
	"fmt"
	"time"
)

// MissingZone is a time zone the API server knows and this package's
// tests make the controller not know, as a kube-controller-manager whose
// time zone database is older than kube-apiserver's.
const MissingZone = "Antarctica/Troll"

func init() {
	load := loadLocation
	loadLocation = func(name string) (*time.Location, error) {
		if name == MissingZone {
			return nil, fmt.Errorf("unknown time zone %s", name)
		}
		return load(name)
	}
}
