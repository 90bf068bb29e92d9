package brokernode

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// Cluster is a set of private nodes joined into one RabbitMQ cluster.
type Cluster struct {
	Nodes []*Node
}

// StartCluster starts size nodes named prefix-1 … prefix-size under dir
// (one subdirectory each, one shared cookie), and joins nodes 2… to node 1
// (stop_app, join_cluster, start_app), as RabbitMQ's clustering guide
// does by hand. On error every node started is killed.
func StartCluster(ctx context.Context, dir, prefix string, size, memoryMiB int) (*Cluster, error) {
	return StartClusterAt(ctx, dir, prefix, size, memoryMiB, 0)
}

// StartClusterAt is StartCluster with fixed ports, as
// scripts/rabbitmq-cluster.sh lays them out: node i listens for AMQP on
// basePort+i and for distribution on basePort+10+i (basePort 0: free
// ports). A bench that shares the machine with other clusters picks its
// own base and prefix.
func StartClusterAt(ctx context.Context, dir, prefix string, size, memoryMiB, basePort int) (*Cluster, error) {
	c := &Cluster{}
	cookie := NewCookie()
	for i := 1; i <= size; i++ {
		o := Options{Dir: filepath.Join(dir, fmt.Sprint(i)), Name: fmt.Sprintf("%s-%d", prefix, i),
			Cookie: cookie, MemoryMiB: memoryMiB}
		if basePort > 0 {
			o.Port, o.DistPort = basePort+i, basePort+10+i
		}
		n, err := Start(ctx, o)
		if err != nil {
			c.Kill()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes[1:] {
		for _, args := range [][]string{{"stop_app"}, {"join_cluster", c.Nodes[0].Name}, {"start_app"}} {
			if _, err := n.Ctl(args...); err != nil {
				c.Kill()
				return nil, err
			}
		}
	}
	out, err := c.Nodes[0].Ctl("cluster_status", "--formatter", "json")
	if err != nil {
		c.Kill()
		return nil, err
	}
	for _, n := range c.Nodes {
		if !strings.Contains(out, n.Name) {
			c.Kill()
			return nil, fmt.Errorf("brokernode: %s missing from the cluster: %s", n.Name, out)
		}
	}
	return c, nil
}

// URLs returns the nodes' AMQP URLs in node order.
func (c *Cluster) URLs() []string {
	var u []string
	for _, n := range c.Nodes {
		u = append(u, n.URL)
	}
	return u
}

// ByName returns the node named name (borda-x-2@localhost), or nil.
func (c *Cluster) ByName(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Stop stops every node (in reverse order, so the first stays the last
// to leave, as the clustering guide advises).
func (c *Cluster) Stop() {
	for i := len(c.Nodes) - 1; i >= 0; i-- {
		c.Nodes[i].Stop()
	}
}

// Kill kills every node at once.
func (c *Cluster) Kill() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

// QueueLeader returns the node name leading quorum queue name in vhost /
// (rabbitmqctl list_queues name leader, asked of node n).
func QueueLeader(n *Node, name string) (string, error) {
	out, err := n.Ctl("list_queues", "-q", "--no-table-headers", "name", "leader")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == name {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("brokernode: queue %s not listed: %s", name, out)
}

// ConnectionNodes returns, for every client connection whose
// client-provided name starts with prefix, the node it is connected to
// (rabbitmqctl list_connections pid client_properties, asked of node n:
// a connection's pid names its node, <name@localhost.N.N.N>).
func ConnectionNodes(n *Node, prefix string) ([]string, error) {
	out, err := n.Ctl("list_connections", "-q", "--no-table-headers", "pid", "client_properties")
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, `"`+prefix) {
			continue
		}
		pid, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		pid = strings.TrimPrefix(strings.Fields(pid)[0], "<")
		if name, _, ok := strings.Cut(pid, "@localhost"); ok {
			nodes = append(nodes, name+"@localhost")
		}
	}
	return nodes, nil
}
