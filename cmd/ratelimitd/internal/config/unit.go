package config

import (
	"math"
	"strings"
	"time"
)

// Unit is a rate_limit.unit. Its values equal those of Envoy's
// envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit, so a server
// converts one to the other with a cast. The zero value is UnitUnknown.
type Unit int32

// The units envoyproxy/ratelimit accepts. A month is 30 days and a year 365
// days, as there: windows are fixed lengths aligned to the Unix epoch, not
// calendar months or years.
const (
	UnitUnknown Unit = 0
	Second      Unit = 1
	Minute      Unit = 2
	Hour        Unit = 3
	Day         Unit = 4
	Month       Unit = 5
	Year        Unit = 6
	Week        Unit = 7
)

var unitNames = [...]string{"unknown", "second", "minute", "hour", "day", "month", "year", "week"}

var unitDurations = [...]time.Duration{0, time.Second, time.Minute, time.Hour, 24 * time.Hour,
	30 * 24 * time.Hour, 365 * 24 * time.Hour, 7 * 24 * time.Hour}

// String returns the unit's name in lower case ("second", ...), or
// "unknown".
func (u Unit) String() string {
	if u < 0 || int(u) >= len(unitNames) {
		return "unknown"
	}
	return unitNames[u]
}

// Duration returns the unit's length, or 0 for UnitUnknown and values
// outside the enum.
func (u Unit) Duration() time.Duration {
	if u < 0 || int(u) >= len(unitDurations) {
		return 0
	}
	return unitDurations[u]
}

// ParseUnit returns the unit named s, in any letter case, as
// envoyproxy/ratelimit reads rate_limit.unit. "unknown" and anything else
// report false.
func ParseUnit(s string) (Unit, bool) {
	for u := Second; int(u) < len(unitNames); u++ {
		if strings.EqualFold(s, unitNames[u]) {
			return u, true
		}
	}
	return UnitUnknown, false
}

// unitFor expresses d as Envoy's RateLimit does, a unit times a
// multiplier, with the longest unit that divides d; UnitUnknown and 0 when
// d is not a whole number of seconds or the multiplier would not fit a
// uint32.
func unitFor(d time.Duration) (Unit, uint32) {
	for _, u := range []Unit{Year, Month, Week, Day, Hour, Minute, Second} {
		if d%u.Duration() == 0 {
			if m := d / u.Duration(); m > 0 && m <= math.MaxUint32 {
				return u, uint32(m)
			}
			return UnitUnknown, 0
		}
	}
	return UnitUnknown, 0
}
