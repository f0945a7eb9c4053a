package printers

import (
	"fmt"
	"strings"
)

// maxListed is how many items kube-apiserver's printers list in one cell
// before they count the rest.
const maxListed = 3

// Abbreviated joins the first three items of list with commas and counts
// the rest (" + 2 more..."), as kube-apiserver prints endpoints and ports.
func Abbreviated(list []string) string {
	if len(list) <= maxListed {
		return strings.Join(list, ",")
	}
	return fmt.Sprintf("%s + %d more...", strings.Join(list[:maxListed], ","), len(list)-maxListed)
}
