package config

import (
	"testing"
	"time"
)

func TestParseUnit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Unit
		ok   bool
	}{
		{"second", Second, true}, {"SECOND", Second, true}, {"Minute", Minute, true}, {"hour", Hour, true},
		{"day", Day, true}, {"week", Week, true}, {"month", Month, true}, {"year", Year, true},
		{"unknown", UnitUnknown, false}, {"UNKNOWN", UnitUnknown, false}, {"", UnitUnknown, false},
		{"fortnight", UnitUnknown, false}, {"seconds", UnitUnknown, false}, {"1", UnitUnknown, false},
	} {
		u, ok := ParseUnit(tc.in)
		if u != tc.want || ok != tc.ok {
			t.Errorf("ParseUnit(%q) = %v, %v; want %v, %v", tc.in, u, ok, tc.want, tc.ok)
		}
	}
}

// The enum values are Envoy's, so a server casts.
func TestUnitValuesAreEnvoys(t *testing.T) {
	want := map[Unit]int32{UnitUnknown: 0, Second: 1, Minute: 2, Hour: 3, Day: 4, Month: 5, Year: 6, Week: 7}
	for u, v := range want {
		if int32(u) != v {
			t.Errorf("%v = %d, want %d", u, int32(u), v)
		}
	}
}

func TestUnitDuration(t *testing.T) {
	const day = 24 * time.Hour
	for u, d := range map[Unit]time.Duration{Second: time.Second, Minute: time.Minute, Hour: time.Hour, Day: day,
		Week: 7 * day, Month: 30 * day, Year: 365 * day, UnitUnknown: 0, Unit(8): 0, Unit(-1): 0} {
		if got := u.Duration(); got != d {
			t.Errorf("%v.Duration() = %v, want %v", u, got, d)
		}
	}
	if s := Unit(9).String(); s != "unknown" {
		t.Errorf("Unit(9).String() = %q", s)
	}
}

func TestUnitFor(t *testing.T) {
	const day = 24 * time.Hour
	for _, tc := range []struct {
		d    time.Duration
		unit Unit
		mult uint32
	}{
		{time.Second, Second, 1}, {90 * time.Second, Second, 90}, {time.Minute, Minute, 1},
		{90 * time.Minute, Minute, 90}, {2 * time.Hour, Hour, 2}, {14 * day, Week, 2}, {60 * day, Month, 2},
		{365 * day, Year, 1}, {366 * day, Day, 366}, {1500 * time.Millisecond, UnitUnknown, 0},
		{time.Millisecond, UnitUnknown, 0}, {(1<<32 - 1) * time.Second, Second, 1<<32 - 1},
		{(1 << 32) * time.Second, UnitUnknown, 0},
	} {
		u, m := unitFor(tc.d)
		if u != tc.unit || m != tc.mult {
			t.Errorf("unitFor(%v) = %d x %v, want %d x %v", tc.d, m, u, tc.mult, tc.unit)
		}
	}
}
