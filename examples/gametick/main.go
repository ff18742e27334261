// Game tick: a server loop that, every tick, decides all players' actions
// in one LimitMany call, reusing the output slice: one hand-off to the
// partitions per tick instead of one per action, and no allocation per
// decision. Each player may fire 5 shots a second, 2 in a burst.
package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

func main() {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	l, err := ratelimit.Open(ratelimit.Options{
		Limits: map[string]ratelimit.Config{
			"fire": {Kind: ratelimit.TokenBucket, Rate: 5, Period: time.Second, Capacity: 2},
		},
		Now: func() time.Time { return now }, // the tick clock
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	players := []string{"ann", "bob", "cat", "dan"}
	// Each player pulls the trigger every n ticks: ann holds it down, bob
	// taps every other tick, cat every third, dan never (0).
	every := []int{1, 2, 3, 0}

	const tick = 100 * time.Millisecond
	reqs := make([]ratelimit.Request, 0, len(players))
	var out []ratelimit.Decision
	who := make([]int, 0, len(players))
	fmt.Println("tick  " + strings.Join(players, "  "))
	for t := range 10 {
		reqs, who = reqs[:0], who[:0]
		for p, name := range players {
			if every[p] != 0 && t%every[p] == 0 {
				reqs = append(reqs, ratelimit.Request{Name: "fire", Key: name})
				who = append(who, p)
			}
		}
		out = l.LimitMany(context.Background(), reqs, out)
		row := []string{"  .", "  .", "  .", "  ."}
		for i, d := range out {
			switch {
			case d.Err != nil:
				log.Fatal(d.Err)
			case d.OK:
				row[who[i]] = "  *" // fired
			default:
				row[who[i]] = "  x" // trigger pulled, weapon cooling
			}
		}
		fmt.Printf("%4d %s\n", t, strings.Join(row, "  "))
		now = now.Add(tick)
	}
	fmt.Println("* fired  x refused (5/s, burst 2)  . idle")
}
