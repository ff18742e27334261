package config_test

import (
	"fmt"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
)

func Example() {
	c, err := config.Parse([]config.File{{Name: "messaging.yaml", Data: []byte(`
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      algorithm: token_bucket
      period: 90s
      requests_per_unit: 3
      capacity: 10
`)}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	m, ok := c.Match("messaging", []config.Entry{{Key: "message_type", Value: "marketing"}, {Key: "to_number", Value: "2061111111"}})
	fmt.Println(ok, m.Limit.Name, m.Key, m.Limit.RequestsPerUnit, m.Limit.Unit, m.Limit.Config.Kind)
	m, ok = c.Match("messaging", []config.Entry{{Key: "to_number", Value: "2061111111"}})
	fmt.Println(ok, m.Limit.Name, m.Key, m.Limit.Config.Rate, m.Limit.Config.Period, m.Limit.UnitMultiplier, m.Limit.Unit)
	_, ok = c.Match("messaging", []config.Entry{{Key: "message_type", Value: "marketing"}})
	fmt.Println(ok)

	_, err = config.Parse([]config.File{{Name: "limits/api.yaml", Data: []byte(`
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: fortnight
      requests_per_unit: 5
`)}}, nil)
	fmt.Println(err)
	// Output:
	// true messaging.message_type=marketing.to_number message_type=marketing.to_number=2061111111 5 day fixed window
	// true messaging.to_number to_number=2061111111 3 1m30s 90 second
	// false
	// limits/api.yaml:6: rate_limit.unit: unknown unit "fortnight" (second, minute, hour, day, week, month or year)
}
