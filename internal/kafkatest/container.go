package kafkatest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/tidemark-streams/tidemark/internal/testbroker"
)

// ContainerImage is the broker image used where a Docker engine exists.
const ContainerImage = "apache/kafka:" + testbroker.KafkaVersion

// startContainer runs apache/kafka in KRaft mode when a Docker engine
// answers. The host port is fixed before start and bound 1:1 because the
// broker must advertise the address clients dial. The container is left to
// testcontainers' reaper when the test binary exits.
func startContainer() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return nil, fmt.Errorf("no Docker engine (%v)", err)
	}
	defer p.Close()
	if err := p.Health(ctx); err != nil {
		return nil, fmt.Errorf("no Docker engine answers (%v)", err)
	}

	port, err := freePort()
	if err != nil {
		return nil, err
	}
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hostPort := strconv.Itoa(port)
	req := testcontainers.ContainerRequest{
		Image:        ContainerImage,
		ExposedPorts: []string{hostPort + "/tcp"},
		Env: map[string]string{
			"KAFKA_NODE_ID":                                  "1",
			"KAFKA_PROCESS_ROLES":                            "broker,controller",
			"KAFKA_LISTENERS":                                "PLAINTEXT://0.0.0.0:" + hostPort + ",CONTROLLER://localhost:9093",
			"KAFKA_ADVERTISED_LISTENERS":                     "PLAINTEXT://127.0.0.1:" + hostPort,
			"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":           "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@localhost:9093",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "1",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":         "0",
			"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                "false",
			"KAFKA_LOG_CLEANER_BACKOFF_MS":                   "100",
		},
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{
				network.MustParsePort(hostPort + "/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: hostPort}},
			}
		},
		WaitingFor: wait.ForListeningPort(hostPort + "/tcp").WithStartupTimeout(2 * time.Minute),
	}
	if _, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: req, Started: true,
	}); err != nil {
		return nil, fmt.Errorf("start %s container: %w", ContainerImage, err)
	}
	addr := "127.0.0.1:" + hostPort
	deadline := time.Now().Add(time.Minute)
	for {
		if err = testbroker.Ping(ctx, addr); err == nil {
			return []string{addr}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s container at %s never answered: %w", ContainerImage, addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
