package engine

import "testing"

// A configuration change keeps bucket state: a bucket is read under its
// limit's new config, capped at the new capacity.
func TestSetConfigKeepsState(t *testing.T) {
	f := newFixture(t, rules, Options{})
	f.decide("d", desc(40, "b=x"))
	f.decide("d", desc(1, "a=x"))
	next := parseConfig(t, `
domain: d
descriptors:
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 50}
  - key: c
    rate_limit: {unit: hour, requests_per_unit: 1}
`)
	if err := f.e.SetConfig(next); err != nil {
		t.Fatal(err)
	}
	if got := f.remaining("d", "b=x"); got != 50 {
		t.Errorf("b holds %v under 50/hour, want 50 (60 capped)", got)
	}
	f.decide("d", desc(45, "b=x"))
	if got := f.remaining("d", "b=x"); got != 5 {
		t.Errorf("b holds %v, want 5", got)
	}
	if st := f.decide("d", desc(1, "a=x")).Statuses[0]; st.Kind != NoLimit {
		t.Errorf("a after its rule was removed: %+v", st)
	}
	if err := f.e.SetConfig(parseConfig(t, rules)); err != nil {
		t.Fatal(err)
	}
	if got := f.remaining("d", "a=x"); got != 2 {
		t.Errorf("a holds %v after its rule came back, want 2 (its state kept)", got)
	}
}
