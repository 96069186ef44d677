package kafkatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark-streams/tidemark/internal/testbroker"
)

// ContainerImage is the broker image used where a Docker engine exists.
const ContainerImage = "apache/kafka:" + testbroker.KafkaVersion

// ContainerName is the container Brokers starts where a Docker engine
// answers. Every test binary shares it, and it keeps running after the
// tests, as the broker of `make kafka-up` does: `docker rm -f
// tidemark-kafkatest` removes it.
const ContainerName = "tidemark-kafkatest"

// startContainer runs apache/kafka in KRaft mode through the docker
// command, or reuses the container an earlier test binary started. The
// host port is chosen before the start and bound 1:1, because the broker
// must advertise the address clients dial. The docker command, rather than
// a Docker client library, keeps the container runtime out of tidemark's
// module requirements: a library user's go.sum does not list it.
func startContainer() ([]string, error) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		return nil, fmt.Errorf("no Docker engine (no docker command: %v)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, docker, "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("no Docker engine answers (%v: %s)", err, bytes.TrimSpace(out))
	}
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addr, err := runningContainer(ctx, docker)
	if err != nil {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		out, runErr := exec.CommandContext(ctx, docker, containerRunArgs(strconv.Itoa(port))...).CombinedOutput()
		// Another test binary may have started it meanwhile: use that one.
		if addr, err = runningContainer(ctx, docker); err != nil {
			if runErr != nil {
				return nil, fmt.Errorf("start %s container: %v: %s", ContainerImage, runErr, bytes.TrimSpace(out))
			}
			return nil, err
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err = testbroker.Ping(ctx, addr); err == nil {
			return []string{addr}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s container %s at %s never answered: %w", ContainerImage, ContainerName, addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// containerRunArgs are the arguments of `docker run` for a single-node
// KRaft broker listening on hostPort.
func containerRunArgs(hostPort string) []string {
	env := map[string]string{
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
	}
	args := []string{"run", "--detach", "--name", ContainerName,
		"--publish", "127.0.0.1:" + hostPort + ":" + hostPort + "/tcp"}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		args = append(args, "--env", k+"="+env[k])
	}
	return append(args, ContainerImage)
}

// runningContainer returns the address of ContainerName, starting it first
// when it exists but is stopped (after a reboot of the Docker engine).
func runningContainer(ctx context.Context, docker string) (string, error) {
	state, err := exec.CommandContext(ctx, docker, "inspect", "--format", "{{.State.Running}}", ContainerName).Output()
	if err != nil {
		return "", fmt.Errorf("no %s container", ContainerName)
	}
	if strings.TrimSpace(string(state)) != "true" {
		if out, err := exec.CommandContext(ctx, docker, "start", ContainerName).CombinedOutput(); err != nil {
			return "", fmt.Errorf("start the stopped %s container: %v: %s", ContainerName, err, bytes.TrimSpace(out))
		}
	}
	out, err := exec.CommandContext(ctx, docker, "port", ContainerName).Output()
	if err != nil {
		return "", fmt.Errorf("ports of the %s container: %w", ContainerName, err)
	}
	return publishedAddr(string(out))
}

// publishedAddr reads the host address from `docker port` output, such as
// "40123/tcp -> 127.0.0.1:40123".
func publishedAddr(out string) (string, error) {
	for _, line := range strings.Split(out, "\n") {
		_, addr, ok := strings.Cut(line, "->")
		if !ok {
			continue
		}
		addr = strings.TrimSpace(addr)
		if host, _, err := net.SplitHostPort(addr); err == nil && host == "127.0.0.1" {
			return addr, nil
		}
	}
	return "", errors.New("the " + ContainerName + " container publishes no port on 127.0.0.1")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
