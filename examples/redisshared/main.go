// Redis-shared: two processes share one limit through a local
// redis-server. Each process (this program, run again as a worker) opens
// its own Limiter on the same Redis and asks for the same "api" limit of
// one key; together they are granted exactly the limit's capacity, 10,
// however their requests interleave.
//
// It starts its own redis-server (appendonly yes, appendfsync always, on a
// unix socket in a temporary directory), or uses REDIS_ADDR when set.
package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/redislimit"
)

var limits = map[string]ratelimit.Config{
	"api": {Kind: ratelimit.TokenBucket, Rate: 10, Period: time.Hour},
}

func main() {
	if os.Getenv("WORKER") != "" {
		worker()
		return
	}
	addr, stop := redisServer()
	err := run(addr)
	stop()
	if err != nil {
		log.Fatal(err)
	}
}

// run starts the two workers and checks that together they got the
// limit's capacity.
func run(addr string) error {
	// The key is fresh on every run, so the shared bucket starts full.
	key := "run-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var workers []*exec.Cmd
	var outs []*bufio.Scanner
	for i := range 2 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "WORKER="+strconv.Itoa(i), "REDIS_ADDR="+addr, "KEY="+key)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		workers, outs = append(workers, cmd), append(outs, bufio.NewScanner(out))
	}
	total := 0
	for i, sc := range outs {
		for sc.Scan() {
			fmt.Printf("worker %d: %s\n", i, sc.Text())
			var granted, denied int
			if _, err := fmt.Sscanf(sc.Text(), "granted %d, denied %d", &granted, &denied); err == nil {
				total += granted
			}
		}
		if err := workers[i].Wait(); err != nil {
			return fmt.Errorf("worker %d: %w", i, err)
		}
	}
	fmt.Printf("granted %d in all, the limit's capacity is %v\n", total, limits["api"].Rate)
	if total != 10 {
		return fmt.Errorf("the two processes did not share the limit")
	}
	return nil
}

// worker asks for 8 tokens of the shared key, one at a time.
func worker() {
	client := newClient(os.Getenv("REDIS_ADDR"))
	defer client.Close()
	l, err := redislimit.Open(client, ratelimit.Options{Limits: limits}, redislimit.KeyPrefix("example:"))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	granted, denied := 0, 0
	for range 8 {
		st, err := l.Limit(context.Background(), ratelimit.Request{Name: "api", Key: os.Getenv("KEY")})
		if err != nil {
			log.Fatal(err)
		}
		if st.OK {
			granted++
		} else {
			denied++
		}
	}
	fmt.Printf("granted %d, denied %d\n", granted, denied)
}

// newClient connects to addr, a host:port or a unix socket's path.
func newClient(addr string) *redis.Client {
	if strings.HasPrefix(addr, "/") {
		return redis.NewClient(&redis.Options{Network: "unix", Addr: addr})
	}
	return redis.NewClient(&redis.Options{Addr: addr})
}

// redisServer returns REDIS_ADDR, or starts a redis-server of its own.
func redisServer() (addr string, stop func()) {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return addr, func() {}
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		log.Fatal("redis-server is not on the PATH: install it (apt-get install redis-server) or set REDIS_ADDR")
	}
	dir, err := os.MkdirTemp("", "redisshared")
	if err != nil {
		log.Fatal(err)
	}
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--dir", dir, "--save", "",
		"--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction")
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	}
	client := newClient(sock)
	defer client.Close()
	for deadline := time.Now().Add(10 * time.Second); client.Ping(context.Background()).Err() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			stop()
			log.Fatal("redis-server did not start")
		}
	}
	return sock, stop
}
