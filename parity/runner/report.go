package runner

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Summary counts identical and different scenarios.
type Summary struct {
	Identical, Different int
	// Explained counts the different scenarios that say why (Differs).
	Explained int
}

// Total is the number of scenarios.
func (s Summary) Total() int { return s.Identical + s.Different }

// Percent is the share of identical scenarios.
func (s Summary) Percent() float64 {
	if s.Total() == 0 {
		return 0
	}
	return 100 * float64(s.Identical) / float64(s.Total())
}

// Summarise counts results in total and per area.
func Summarise(results []Result) (Summary, map[string]Summary) {
	var all Summary
	areas := map[string]Summary{}
	for _, r := range results {
		a := areas[r.Scenario.Area]
		if r.Identical() {
			all.Identical++
			a.Identical++
		} else {
			all.Different++
			a.Different++
			if r.Scenario.Differs != "" {
				all.Explained++
			}
		}
		areas[r.Scenario.Area] = a
	}
	return all, areas
}

// maxDiffLines keeps PARITY.md readable; the runner prints whole diffs.
const maxDiffLines = 40

// WriteReport writes PARITY.md: the figure, a table per area, and a short
// diff for each different scenario.
func WriteReport(w io.Writer, header string, results []Result) error {
	all, areas := Summarise(results)
	var b strings.Builder
	fmt.Fprintf(&b, "# Parity with kube-apiserver v1.37.2\n\n%s\n", header)
	fmt.Fprintf(&b, "**%d identical, %d different: %.1f%% of %d scenarios.**", all.Identical, all.Different, all.Percent(), all.Total())
	if all.Explained > 0 {
		fmt.Fprintf(&b, " %d of the differences are explained (\"Why:\" next to each).", all.Explained)
	}
	b.WriteString("\n\n")
	b.WriteString("| area | identical | different | % |\n|---|---:|---:|---:|\n")
	names := make([]string, 0, len(areas))
	for a := range areas {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		s := areas[a]
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f%% |\n", a, s.Identical, s.Different, s.Percent())
	}
	b.WriteString("\n## Differences\n\n")
	if all.Different == 0 {
		b.WriteString("None.\n")
	}
	b.WriteString("`-` is kube-apiserver, `+` is kubeembed, after normalisation.\n\n")
	for _, r := range results {
		if r.Identical() {
			continue
		}
		fmt.Fprintf(&b, "### %s\n\n(%s)\n\n", r.Scenario.FullName(), r.Scenario.File)
		if r.Scenario.Differs != "" {
			fmt.Fprintf(&b, "Why: %s\n\n", r.Scenario.Differs)
		}
		if r.SetupErr != "" {
			fmt.Fprintf(&b, "setup failed: %s\n\n", r.SetupErr)
			continue
		}
		for i, s := range r.Steps {
			if s.Diff == "" {
				continue
			}
			fmt.Fprintf(&b, "step %d: %s %s\n\n```diff\n%s\n```\n\n", i+1, s.Step.Verb, s.Step.Path, Truncate(s.Diff, maxDiffLines))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Truncate keeps the first n lines of s.
func Truncate(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n... %d more lines", len(lines)-n)
}
