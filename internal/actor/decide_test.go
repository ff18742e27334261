package actor

// Deciding a call's members (decide.go).

import "testing"

// decideAll: members see the ones before them (repeats of one bucket
// share its canonical item); a denial anywhere writes nothing; counts
// count one decision per call.
func TestDecideAllAndCount(t *testing.T) {
	lim := tokenLim(10)
	g := testGroup(1, NopLog{}, frozen)
	x := itemFor(g, lim, "n", "x", 0)
	y := itemFor(g, lim, "n", "y", 0)

	c := takeCall(4, x, y, x)
	g.group(c)
	if !decideAll(c, t0) {
		t.Fatalf("4+4 from x and 4 from y denied: %+v", c.Members)
	}
	var lefts []float64
	for _, m := range c.Members {
		lefts = append(lefts, m.Left)
	}
	writes := 0
	for i := range c.Items {
		if c.Items[i].Write {
			writes++
			if c.Items[i].canon != int32(i) {
				t.Errorf("non-canonical item %d marked Write", i)
			}
		}
	}
	if writes != 2 {
		t.Errorf("%d items to write, want 2 (x once, y once)", writes)
	}
	var n Counts
	n.count(c, true)
	if n.Grants != 1 || n.Denials != 0 || n.Reservations != 0 {
		t.Errorf("counts %+v", n)
	}
	c.Release()

	c = takeCall(4, x, x, x) // 12 of 10
	g.group(c)
	if decideAll(c, t0) {
		t.Fatal("12 of 10 granted")
	}
	for i := range c.Items {
		if c.Items[i].Write {
			t.Errorf("item %d marked Write after a denial", i)
		}
	}
	n = Counts{}
	n.count(c, false)
	if n.Denials != 1 || n.Grants != 0 {
		t.Errorf("counts %+v", n)
	}
	c.Release()

	// A reservation is one grant and one reservation; checks count nothing.
	c = takeCall(12, x)
	c.Members[0].Reserve = true
	if !decideAll(c, t0) || c.Members[0].RetryAfter <= 0 {
		t.Fatalf("reservation: %+v", c.Members[0])
	}
	n = Counts{}
	n.count(c, true)
	if n.Grants != 1 || n.Reservations != 1 {
		t.Errorf("counts %+v", n)
	}
	c.Members[0].Op = OpCheck
	n = Counts{}
	n.count(c, true)
	if n != (Counts{}) {
		t.Errorf("check counted: %+v", n)
	}
	c.Release()
	_ = lefts
}
