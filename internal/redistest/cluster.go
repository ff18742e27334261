package redistest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Cluster is a Redis Cluster of three masters without replicas, every
// node a Server on loopback TCP.
type Cluster struct {
	Nodes []*Server
}

// clusterTimeout bounds the wait for a new cluster's state to be ok on
// every node.
const clusterTimeout = 30 * time.Second

// StartCluster starts three cluster-enabled servers, node1 to node3 in
// dir, each with args after the base arguments and the cluster's own
// (cluster-enabled, its nodes.conf in its directory, a node timeout of
// 5 s), joins them with redis-cli --cluster create (the 16384 slots
// split between them) and returns once every node reports
// cluster_state:ok. On failure nothing is left running.
func StartCluster(dir string, args ...string) (*Cluster, error) {
	cli, err := LookPath("redis-cli")
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	for i := range 3 {
		ndir := filepath.Join(dir, "node"+strconv.Itoa(i+1))
		n, err := Start(Config{Dir: ndir, Args: append([]string{"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(ndir, "nodes.conf"), "--cluster-node-timeout", "5000"}, args...)})
		if err != nil {
			c.Kill()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	create := append(append([]string{"--cluster", "create"}, c.Addrs()...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, create...).CombinedOutput(); err != nil {
		c.Kill()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(clusterTimeout)
	for _, n := range c.Nodes {
		for {
			info, err := n.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Kill()
				return nil, fmt.Errorf("redis cluster not ok on %s after %v: %v %s", n.Addr(), clusterTimeout, err, info)
			}
			time.Sleep(pollInterval)
		}
	}
	return c, nil
}

// Addrs returns the nodes' addresses (host:port), in the order of Nodes.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr())
	}
	return a
}

// Stop stops every node (see Server.Stop).
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// Kill kills every node (see Server.Kill).
func (c *Cluster) Kill() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}
