package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed7fbd42b6/ratelimit/internal/redistest"
)

// redisCells is an outcome of the keys and limitmany scenarios at 256
// callers: ours in memory, the striped map, ours on Redis and redis_rate,
// with made-up figures (decisions/s, p99 in ns), three runs each.
func redisCells(t *testing.T) *outcome {
	cfg := hbCfg(t, 100)
	cfg.callers, cfg.runs = []int{256}, 3
	o := &outcome{cfg: cfg, scenarios: selectScenarios(buildScenarios(cfg), []string{"keys", "limitmany"}),
		impls: selectImpls([]string{"memory", "redis"}, []string{"striped", "redis_rate"})}
	figures := map[string][2]float64{
		"ours/memory": {1e6, 1e6}, "striped/memory": {2e6, 1e6},
		"ours/redis": {60e3, 8e6}, "redis_rate/redis": {10e3, 20e6},
	}
	for _, sc := range o.scenarios {
		for _, im := range o.impls {
			f := figures[im.label()]
			var runs []*result
			for i := range 3 {
				x := 1 + float64(i)/100 // the same ratio in every run
				runs = append(runs, &result{Scenario: sc.name, Impl: im.name, Mode: im.mode, Callers: 256,
					DecisionsPerSec: f[0] * x, P99: f[1] * x, Check: check{OK: true}})
			}
			o.results = append(o.results, combine(runs))
		}
	}
	var bases []*implementation
	for _, im := range o.impls {
		if !im.ours() {
			bases = append(bases, im)
		}
	}
	computeRatios(o.results, bases)
	return o
}

// Ours on Redis is compared with redis_rate on the same server, never with
// the in-memory striped map; ours in memory is not compared with
// redis_rate.
func TestRedisPairsWithRedisRateOnly(t *testing.T) {
	o := redisCells(t)
	red := find(o.results, "keys", 256, "ours", "redis", "")
	mem := find(o.results, "keys", 256, "ours", "memory", "")
	if _, ok := red.Ratios["striped"]; ok {
		t.Errorf("ours/redis compared with striped/memory: %v", red.Ratios)
	}
	if q, ok := red.Ratios["redis_rate"]; !ok || q.Throughput != 6 || q.P99 != 0.4 {
		t.Errorf("ours/redis against redis_rate: %+v, want throughput 6x, p99 0.4x", q)
	}
	if _, ok := mem.Ratios["redis_rate"]; ok {
		t.Errorf("ours/memory compared with redis_rate/redis: %v", mem.Ratios)
	}
	if q, ok := mem.Ratios["striped"]; !ok || q.Throughput != 0.5 {
		t.Errorf("ours/memory against striped: %+v, want 0.5x", q)
	}
	if !comparable("memory", "durable") || comparable("memory", "redis") || comparable("redis", "durable") || !comparable("redis", "redis") {
		t.Errorf("comparable modes wrong")
	}
}

// The Redis targets are judged on ours/redis over redis_rate/redis: 6x
// meets ">= 5x" and a p99 of 0.4x meets "< 1x", but not LimitMany's
// ">= 20x".
func TestRedisTargets(t *testing.T) {
	o := redisCells(t)
	got := map[string]targetResult{}
	for _, tr := range evalTargets(targets, o.results) {
		got[tr.Name] = tr
	}
	for name, want := range map[string]string{
		"Redis vs redis_rate":           targetMet,
		"Redis p99 vs redis_rate":       targetMet,
		"Redis LimitMany vs redis_rate": targetMissed,
		"memory vs striped":             targetNotRun, // at 1 caller: not run
	} {
		if got[name].Status != want {
			t.Errorf("%s: %s (%v), want %s", name, got[name].Status, got[name].Value, want)
		}
	}
}

// The Redis cells get a table of their own under the in-process one, with
// only the scenarios they ran, and a ratio column against redis_rate.
func TestSummaryShowsRedisInItsOwnTable(t *testing.T) {
	o := redisCells(t)
	o.targets = evalTargets(targets, o.results)
	groups := summaryGroups(o.impls)
	var labels [][]string
	for _, g := range groups {
		var ls []string
		for _, im := range g {
			ls = append(ls, im.label())
		}
		labels = append(labels, ls)
	}
	if len(labels) != 2 || !slices.Equal(labels[0], []string{"ours/memory", "striped/memory"}) ||
		!slices.Equal(labels[1], []string{"ours/redis", "redis_rate/redis"}) {
		t.Fatalf("summary groups %v", labels)
	}
	var b bytes.Buffer
	printSummary(&b, o)
	out := b.String()
	var redisHeader, ratioRow string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "scenario") && strings.Contains(l, "ours/redis") {
			redisHeader = l
		}
		if strings.HasPrefix(l, "keys") && strings.HasSuffix(l, "6.00x") {
			ratioRow = l
		}
	}
	if redisHeader == "" || strings.Contains(redisHeader, "striped") || ratioRow == "" ||
		!strings.Contains(out, "redis vs redis_rate") {
		t.Errorf("summary:\n%s", out)
	}
}

// Without redis-server on the PATH (and no -redis), both Redis
// implementations are left out with one line saying how to get them.
func TestRedisCellsSkippedWithoutServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, format) }
	impls := runnable(selectImpls([]string{"memory", "redis"}, []string{"striped", "redis_rate"}), note)
	for _, im := range impls {
		if im.mode == "redis" {
			t.Errorf("%s runs without a server", im.label())
		}
	}
	if len(impls) != 2 || len(notes) != 1 || !strings.Contains(redisSkip(), "apt-get install redis-server") {
		t.Errorf("runnable %d implementations, notes %q, skip %q", len(impls), notes, redisSkip())
	}
}

// A Redis cell leaves no key behind: on the harness's own server none at
// all (a key left to expire would make the server work, and fsync its
// DEL, during the next cell), on -redis's none under the cell's prefix,
// and nothing else is touched there.
func TestRedisCellLeavesNoKeys(t *testing.T) {
	srv := redistest.ForTest(t, redistest.Config{Args: redistest.Durable()})
	ctx := context.Background()
	for _, owned := range []bool{true, false} {
		admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer admin.Close()
		s := &redisServer{addr: srv.Addr(), owned: owned, admin: admin}
		if err := admin.Set(ctx, "theirs", "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		prefix, err := s.prepare()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a", "b", "c"} {
			if err := admin.Set(ctx, prefix+k, "1", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.release(prefix); err != nil {
			t.Fatal(err)
		}
		keys, err := admin.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"theirs"}
		if owned {
			want = nil
		}
		if !slices.Equal(keys, want) {
			t.Errorf("owned %v: keys after release %q, want %q", owned, keys, want)
		}
	}
}
