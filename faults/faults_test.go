package faults

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRecorderForgetsTheOldest(t *testing.T) {
	t.Parallel()
	var r Recorder
	for i := range MaxRecords + 1 {
		r.add(Record{Code: i})
	}
	recs := r.Records()
	assert.Len(t, recs, MaxRecords-MaxRecords/10+1)
	assert.Equal(t, MaxRecords/10, recs[0].Code, "the oldest tenth forgotten")
	assert.Equal(t, MaxRecords, recs[len(recs)-1].Code)
}

func TestRuleSelection(t *testing.T) {
	t.Parallel()
	var i Injector
	req := Request{Verb: "update", Resource: "configmaps", Namespace: "a", Name: "x", User: "u"}
	fail := Fail(assert.AnError)
	remove := i.Add(Rule{Match: Match{Verb: "update", Name: "y"}, Action: fail})
	assert.Nil(t, i.action(req), "name differs")
	remove()
	i.Add(Rule{Match: Match{Verb: "update", Namespace: "a"}, When: func(r Request) bool { return r.User == "u" }, Times: 2, Action: fail})
	assert.NotNil(t, i.action(req))
	assert.NotNil(t, i.action(req))
	assert.Nil(t, i.action(req), "Times: 2")
	i.Reset()
	i.Add(Rule{Probability: 0.5, Action: fail})
	hits := 0
	for range 1000 {
		if i.action(req) != nil {
			hits++
		}
	}
	assert.InDelta(t, 500, hits, 100, "about half")
}
