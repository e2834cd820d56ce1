// Package redistest starts and stops the real Redis Cluster of the bench
// harness and of the tests of the Redis store engine, of rate limits across
// nodes and of several gateway processes: 6 nodes (3 masters, 3 replicas) on
// loopback through scripts/redis-cluster.sh, which installs redis when it is
// missing.
//
// Each test binary takes its own first port, so that packages tested at once
// never stop each other's cluster. A cluster found running on that port is
// reused and left running; one that this process started is stopped by Stop.
//
// When the cluster cannot be had (redis cannot be installed here), a test
// asking for it is skipped, unless GATEWAY_REQUIRE_REDIS=1 is set (CI sets it):
// then it fails.
package redistest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/modelgate/gateway/store/internal/serverscript"
)

// Cluster is the cluster of one first port, started once on first use.
type Cluster struct {
	Port int // first port: the nodes listen on Port..Port+5

	srv serverscript.Server
}

var script = serverscript.Script{File: "redis-cluster.sh", Dir: "gateway-redis-cluster", PortEnv: "REDIS_CLUSTER_PORT"}

// Addrs returns the addresses of the cluster's nodes, starting it on first
// use; it skips (or fails, see the package doc) t when there is no cluster.
func (c *Cluster) Addrs(t testing.TB) []string {
	t.Helper()
	return strings.Fields(c.srv.Start(t, script, c.Port, "Redis Cluster", "GATEWAY_REQUIRE_REDIS"))
}

// Stop stops the cluster and removes its data if this process started it.
func (c *Cluster) Stop() { c.srv.Stop(script, c.Port) }

// Dir is the data directory of the cluster on port: fixed, so that a cluster
// a test process left running is found and reused.
func Dir(port int) string { return script.DataDir(port) }

// PidFile is the pidfile of the node listening on nodePort of the cluster of
// port.
func PidFile(port, nodePort int) string {
	return filepath.Join(Dir(port), strconv.Itoa(nodePort), "redis.pid")
}

// Run runs the script with cmd (start, stop, status) on the cluster of port,
// with env added to the environment, and returns its output.
func Run(cmd string, port int, env ...string) (string, error) { return script.Run(cmd, port, env...) }

// StartPort starts the cluster of port, with env added to the environment (see
// Run), for t alone: it fails t when the cluster cannot be started, and stops
// it, failing t when it cannot, once t ends. It returns the nodes' addresses.
func StartPort(t testing.TB, port int, env ...string) []string {
	t.Helper()
	out, err := Run("start", port, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := StopPort(port); err != nil {
			t.Error(err)
		}
	})
	return strings.Fields(out)
}

// StopPort stops the cluster of port and removes its data directory.
func StopPort(port int) error { return script.Stop(port) }

// Client returns a plain client of the cluster, closed when t ends.
func Client(t testing.TB, addrs []string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("redis client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// KillMasterOf sends SIGKILL to the master of the cluster of port that holds
// key, and returns the node's port.
func KillMasterOf(t testing.TB, port int, addrs []string, key string) int {
	t.Helper()
	c := Client(t, addrs)
	ctx := context.Background()
	slot, err := c.Do(ctx, c.B().ClusterKeyslot().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := c.Do(ctx, c.B().ClusterNodes().Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	node := MasterPort(nodes, slot)
	if node == 0 {
		t.Fatalf("no master holds slot %d:\n%s", slot, nodes)
	}
	b, err := os.ReadFile(PidFile(port, node))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return node
}

// MasterPort returns the port of the master that serves slot in a CLUSTER
// NODES reply, or 0.
func MasterPort(nodes string, slot int64) int {
	for _, line := range strings.Split(nodes, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 9 || !strings.Contains(fields[2], "master") {
			continue
		}
		for _, r := range fields[8:] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.ParseInt(lo, 10, 64)
			b, err2 := strconv.ParseInt(hi, 10, 64)
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				addr, _, _ := strings.Cut(fields[1], "@")
				_, p, _ := strings.Cut(addr, ":")
				port, _ := strconv.Atoi(p)
				return port
			}
		}
	}
	return 0
}

// OK reports whether a node other than the one on port killed sees the
// cluster ok.
func OK(c rueidis.Client, killed int) bool {
	for addr, node := range c.Nodes() {
		if strings.HasSuffix(addr, ":"+strconv.Itoa(killed)) {
			continue
		}
		return clusterOK(node)
	}
	return false
}

// AllOK reports whether every node the client knows sees the cluster ok: a
// failover has settled, a node that rejoined included. Until then a node
// that still sees a slot uncovered answers CLUSTERDOWN.
func AllOK(c rueidis.Client) bool {
	nodes := c.Nodes()
	for _, node := range nodes {
		if !clusterOK(node) {
			return false
		}
	}
	return len(nodes) > 0
}

// clusterOK reports whether node answers that it sees the cluster ok.
func clusterOK(node rueidis.Client) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := node.Do(ctx, node.B().ClusterInfo().Build()).ToString()
	return err == nil && strings.Contains(info, "cluster_state:ok")
}
