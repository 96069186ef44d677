package testbroker

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
)

// serverProperties is a single-node KRaft broker with static voters (so
// `format` needs no quorum flag), internal topics sized for one broker, and
// auto-creation off so tests catch missing-topic bugs. Extra client
// listeners (Config.Listeners) are added to listeners,
// advertised.listeners and the protocol map; brokers and the controller
// keep talking PLAINTEXT.
func serverProperties(port, controllerPort int, dataDir string, extra ...listener) string {
	listeners := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", port, controllerPort)
	advertised := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", port)
	protocols := "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
	for _, l := range extra {
		listeners += fmt.Sprintf(",%s://127.0.0.1:%d", l.name, l.port)
		advertised += fmt.Sprintf(",%s://127.0.0.1:%d", l.name, l.port)
		protocols += "," + l.name + ":" + l.protocol
	}
	lines := []string{
		"process.roles=broker,controller",
		"node.id=1",
		fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d", controllerPort),
		"listeners=" + listeners,
		"advertised.listeners=" + advertised,
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=" + protocols,
		"log.dirs=" + dataDir,
		"num.partitions=1",
		"default.replication.factor=1",
		"min.insync.replicas=1",
		"auto.create.topics.enable=false",
		"offsets.topic.replication.factor=1",
		"offsets.topic.num.partitions=1",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"transaction.state.log.num.partitions=1",
		"share.coordinator.state.topic.replication.factor=1",
		"share.coordinator.state.topic.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
		"log.cleaner.backoff.ms=100",
		"log.cleaner.dedupe.buffer.size=33554432",
		// Tests create many short-lived topics; keep the broker's own
		// housekeeping light on a 2-core machine.
		"num.network.threads=2",
		"num.io.threads=4",
		"log.retention.check.interval.ms=30000",
	}
	return strings.Join(lines, "\n") + "\n"
}

// listener is an extra client listener: Config.Listeners with its port.
type listener struct {
	name, protocol string
	port           int
}

// extraListeners gives each of Config.Listeners, sorted by name, one of
// ports.
func extraListeners(m map[string]string, ports []int) []listener {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	ls := make([]listener, len(names))
	for i, n := range names {
		ls[i] = listener{name: n, protocol: m[n], port: ports[i]}
	}
	return ls
}

// extraProperties renders Config.Properties, sorted, one per line.
func extraProperties(props map[string]string) string {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + props[k] + "\n")
	}
	return b.String()
}

// bootstrapFromProperties returns the client address that a server.properties
// written by serverProperties advertises: Start reuses it, so a restarted
// broker keeps its ports.
func bootstrapFromProperties(props string) (string, error) {
	for _, line := range strings.Split(props, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "advertised.listeners=")
		if !ok {
			continue
		}
		for _, l := range strings.Split(v, ",") {
			if addr, ok := strings.CutPrefix(strings.TrimSpace(l), "PLAINTEXT://"); ok {
				if _, _, err := net.SplitHostPort(addr); err != nil {
					return "", fmt.Errorf("advertised listener %q: %w", l, err)
				}
				return addr, nil
			}
		}
		return "", fmt.Errorf("advertised.listeners=%s has no PLAINTEXT listener", v)
	}
	return "", errors.New("no advertised.listeners line")
}

const log4j2Properties = `status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.console.ref = STDOUT
logger.kafka.name = kafka.server.KafkaRaftServer
logger.kafka.level = info
`

// freePorts asks the kernel for n distinct free TCP ports on 127.0.0.1. The
// ports are fixed before the broker starts because the advertised listener
// must name the real port.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("broker: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
