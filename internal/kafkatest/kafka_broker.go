package kafkatest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// kafkaCluster is a real Apache Kafka cluster in KRaft mode: one JVM per node on loopback
// ports. One node is a combined broker and controller; with more than one broker a
// dedicated controller runs beside them, so that any broker can be killed and restarted.
type kafkaCluster struct {
	version    string
	libs       string
	dir        string
	id         string
	jvmOptions []string
	ports      *portLease
	ownDir     bool        // dir was made for this cluster (not a DataDir): remove deletes it
	keep       atomic.Bool // a test that used the cluster failed: its logs stay for reading

	controller *kafkaNode // nil when the only broker is also the controller
	brokers    []*kafkaNode
}

// kafkaNode is one JVM of a kafkaCluster.
type kafkaNode struct {
	id         int32
	dir        string
	props      string
	clientPort int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exits
}

// startupTimeout bounds how long a node may take to answer; a JVM starts in about 5 s on
// two cores, several at once take longer: under the suite's load, a 3-broker Kafka 3.9.1
// cluster's four JVMs once took over 90 s (its controller 27 s to elect itself).
const startupTimeout = 3 * time.Minute

func startKafka(cfg config) (*kafkaCluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	libs, err := FetchKafka(ctx, cfg.kafkaVersion)
	if err != nil {
		return nil, err
	}
	k := &kafkaCluster{version: cfg.kafkaVersion, libs: libs, dir: cfg.dataDir, id: kafkaUUID(), jvmOptions: cfg.jvmOptions}
	if k.dir == "" {
		if k.dir, err = os.MkdirTemp("", "kafkatest-kafka-"); err != nil {
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
		k.ownDir = true
	}
	if k.jvmOptions == nil {
		k.jvmOptions = testJVMOptions
	}
	if err := k.layout(cfg); err != nil {
		k.close()
		return nil, err
	}
	if err := k.format(ctx, cfg); err != nil {
		k.close()
		return nil, err
	}
	var errs []error
	for _, n := range k.nodes() {
		if err := k.startNode(n); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		k.close()
		return nil, err
	}
	if err := k.waitListening(k.brokers, startupTimeout); err != nil {
		err = fmt.Errorf("%w\n%s", err, k.logTail(40))
		k.close()
		return nil, err
	}
	return k, nil
}

func (k *kafkaCluster) nodes() []*kafkaNode {
	if k.controller == nil {
		return k.brokers
	}
	return append([]*kafkaNode{k.controller}, k.brokers...)
}

// layout picks ports and writes every node's server.properties and log4j2 configuration.
func (k *kafkaCluster) layout(cfg config) error {
	combined := cfg.brokers == 1
	n := cfg.brokers
	var err error
	lease := leasePorts
	if cfg.leasePorts != nil {
		lease = cfg.leasePorts
	}
	if k.ports, err = lease(3*n + 1); err != nil {
		return err
	}
	ports := k.ports.ports
	controllerID := int32(1)
	if !combined {
		controllerID = 1000
	}
	controllerPort := ports[3*n]
	voters := fmt.Sprintf("%d@127.0.0.1:%d", controllerID, controllerPort)
	clientProtocol := "PLAINTEXT"
	if cfg.aclUser != "" {
		clientProtocol = "SASL_PLAINTEXT"
	}
	replication := min(n, 3)
	base := map[string]string{
		"controller.quorum.voters":   voters,
		"controller.listener.names":  "CONTROLLER",
		"inter.broker.listener.name": "INTERNAL",
		"listener.security.protocol.map": "CLIENT:" + clientProtocol +
			",INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"auto.create.topics.enable":                        "false",
		"offsets.topic.replication.factor":                 fmt.Sprint(replication),
		"offsets.topic.num.partitions":                     "3",
		"transaction.state.log.replication.factor":         fmt.Sprint(replication),
		"transaction.state.log.min.isr":                    "1",
		"transaction.state.log.num.partitions":             "3",
		"share.coordinator.state.topic.replication.factor": fmt.Sprint(replication),
		"share.coordinator.state.topic.min.isr":            "1",
		"group.initial.rebalance.delay.ms":                 "0",
		// A killed broker is noticed (and its partitions move) within seconds.
		"broker.heartbeat.interval.ms": "500",
		"broker.session.timeout.ms":    "3000",
		// The log cleaner and retention act within seconds, so tests can wait for them.
		"log.cleaner.backoff.ms":                                      "200",
		"log.cleaner.dedupe.buffer.size":                              "8388608",
		"log.cleaner.threads":                                         "1",
		"log.segment.delete.delay.ms":                                 "0",
		"log.retention.check.interval.ms":                             "1000",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
		"unclean.leader.election.enable":                              "false",
	}
	if cfg.aclUser != "" {
		base["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		// ANONYMOUS is the broker itself on the loopback-only PLAINTEXT internal and
		// controller listeners.
		base["super.users"] = "User:" + cfg.aclUser + ";User:ANONYMOUS"
		base["allow.everyone.if.no.acl.found"] = "false"
		base["sasl.enabled.mechanisms"] = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
		scram := "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		base["listener.name.client.scram-sha-256.sasl.jaas.config"] = scram
		base["listener.name.client.scram-sha-512.sasl.jaas.config"] = scram
		plain := fmt.Sprintf("org.apache.kafka.common.security.plain.PlainLoginModule required user_%s=%q", cfg.aclUser, cfg.aclPassword)
		for _, u := range slices.Sorted(maps.Keys(cfg.users)) {
			plain += fmt.Sprintf(" user_%s=%q", u, cfg.users[u])
		}
		base["listener.name.client.plain.sasl.jaas.config"] = plain + ";"
	}
	for key, v := range cfg.brokerConfigs {
		base[key] = v
	}

	mk := func(id int32, roles string, ports []int) (*kafkaNode, error) {
		nd := &kafkaNode{id: id, dir: filepath.Join(k.dir, fmt.Sprintf("node-%d", id))}
		props := map[string]string{"process.roles": roles, "node.id": fmt.Sprint(id),
			"log.dirs": filepath.Join(nd.dir, "data")}
		var listeners, advertised []string
		if strings.Contains(roles, "broker") {
			nd.clientPort = ports[0]
			listeners = append(listeners, fmt.Sprintf("CLIENT://127.0.0.1:%d", ports[0]), fmt.Sprintf("INTERNAL://127.0.0.1:%d", ports[1]))
			advertised = append(advertised, listeners...)
		}
		if strings.Contains(roles, "controller") {
			listeners = append(listeners, fmt.Sprintf("CONTROLLER://127.0.0.1:%d", controllerPort))
		}
		props["listeners"] = strings.Join(listeners, ",")
		if len(advertised) > 0 {
			props["advertised.listeners"] = strings.Join(advertised, ",")
		}
		for key, v := range base {
			if _, set := props[key]; !set {
				props[key] = v
			}
		}
		if err := os.MkdirAll(filepath.Join(nd.dir, "data"), 0o755); err != nil {
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
		nd.props = filepath.Join(nd.dir, "server.properties")
		if err := os.WriteFile(nd.props, []byte(propertiesText(props)), 0o644); err != nil {
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
		log4j := fmt.Sprintf(`status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = %s
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%%d] %%p %%m (%%c)%%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
`, filepath.Join(nd.dir, "server.log"))
		if err := os.WriteFile(filepath.Join(nd.dir, "log4j2.properties"), []byte(log4j), 0o644); err != nil {
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
		// Kafka 3.x logs through log4j 1 (reload4j), which reads a file of its own.
		log4j1 := fmt.Sprintf(`log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=%s
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%%d] %%p %%m (%%c)%%n
`, filepath.Join(nd.dir, "server.log"))
		if err := os.WriteFile(filepath.Join(nd.dir, "log4j.properties"), []byte(log4j1), 0o644); err != nil {
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
		return nd, nil
	}
	if combined {
		nd, err := mk(1, "broker,controller", ports[0:3])
		if err != nil {
			return err
		}
		k.brokers = []*kafkaNode{nd}
		return nil
	}
	if k.controller, err = mk(controllerID, "controller", nil); err != nil {
		return err
	}
	for i := range n {
		nd, err := mk(int32(i+1), "broker", ports[3*i:3*i+3])
		if err != nil {
			return err
		}
		k.brokers = append(k.brokers, nd)
	}
	return nil
}

// format runs kafka-storage's format for the controller (with the SCRAM credentials and
// the default feature levels: transactions v2 on 4.x) and writes the brokers'
// meta.properties, which is all format does for a broker-only node.
func (k *kafkaCluster) format(ctx context.Context, cfg config) error {
	ctrl := k.controller
	if ctrl == nil {
		ctrl = k.brokers[0]
	}
	args := []string{"kafka.tools.StorageTool", "format", "-t", k.id, "-c", ctrl.props, "--ignore-formatted"}
	if cfg.aclUser != "" {
		for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, cfg.aclUser, cfg.aclPassword))
		}
		for _, u := range slices.Sorted(maps.Keys(cfg.users)) {
			args = append(args, "--add-scram", fmt.Sprintf("SCRAM-SHA-256=[name=%s,password=%s]", u, cfg.users[u]))
		}
	}
	cmd := k.java(ctrl, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kafkatest: formatting Kafka %s storage: %w\n%s", k.version, err, lastLines(string(out), 20))
	}
	for _, b := range k.brokers {
		if b == ctrl {
			continue
		}
		meta := fmt.Sprintf("version=1\ncluster.id=%s\nnode.id=%d\ndirectory.id=%s\n", k.id, b.id, kafkaUUID())
		if err := os.WriteFile(filepath.Join(b.dir, "data", "meta.properties"), []byte(meta), 0o644); err != nil {
			return fmt.Errorf("kafkatest: %w", err)
		}
	}
	return nil
}

// testJVMOptions give a broker a small heap and a quick-starting JIT: tests run several
// JVMs on two cores.
var testJVMOptions = []string{"-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k"}

// java returns the command that runs class (the first arg) with the cluster's jars, the
// node's logging and the cluster's JVM options.
func (k *kafkaCluster) java(n *kafkaNode, args ...string) *exec.Cmd {
	jargs := append(slices.Clone(k.jvmOptions),
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile="+filepath.Join(n.dir, "log4j2.properties"),
		"-Dlog4j.configuration=file:"+filepath.Join(n.dir, "log4j.properties"),
		"-cp", filepath.Join(k.libs, "*"),
	)
	cmd := exec.Command("java", append(jargs, args...)...)
	cmd.Dir = n.dir
	killWithParent(cmd)
	return cmd
}

func (k *kafkaCluster) startNode(n *kafkaNode) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.done:
		default:
			return fmt.Errorf("kafkatest: node %d is already running", n.id)
		}
	}
	out, err := os.OpenFile(filepath.Join(n.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	cmd := k.java(n, "kafka.Kafka", n.props)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("kafkatest: starting Kafka %s node %d: %w", k.version, n.id, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(done)
	}()
	n.cmd, n.done = cmd, done
	return nil
}

// waitListening waits until every one of brokers, just started, accepts connections;
// whether the cluster serves is then checked with a Metadata request by the caller.
func (k *kafkaCluster) waitListening(brokers []*kafkaNode, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, b := range brokers {
		addr := fmt.Sprintf("127.0.0.1:%d", b.clientPort)
		for {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
				break
			}
			select {
			case <-b.done:
				return fmt.Errorf("kafkatest: Kafka %s node %d exited during startup", k.version, b.id)
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("kafkatest: Kafka %s node %d does not listen on %s after %v", k.version, b.id, addr, timeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

func (n *kafkaNode) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// stop ends the node's JVM: SIGTERM and a clean shutdown, or SIGKILL when kill is set or
// the JVM does not exit in time.
func (n *kafkaNode) stop(kill bool) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	if !kill {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
			return
		case <-time.After(30 * time.Second):
		}
	}
	_ = cmd.Process.Kill()
	<-done
}

func (k *kafkaCluster) close() {
	var wg sync.WaitGroup
	// Brokers first: a controller that goes first leaves them retrying their shutdown.
	for _, b := range k.brokers {
		wg.Add(1)
		go func() { defer wg.Done(); b.stop(false) }()
	}
	wg.Wait()
	if k.controller != nil {
		k.controller.stop(false)
	}
	if k.ports != nil {
		k.ports.release()
	}
}

// remove deletes the cluster's folder after close unless a test that used it failed; a
// cluster writes more than 100 MiB there, and a suite starts dozens.
func (k *kafkaCluster) remove() {
	if k.ownDir && !k.keep.Load() {
		os.RemoveAll(k.dir)
	}
}

func (k *kafkaCluster) addrs() []string {
	out := make([]string, len(k.brokers))
	for i, b := range k.brokers {
		out[i] = fmt.Sprintf("127.0.0.1:%d", b.clientPort)
	}
	return out
}

func (k *kafkaCluster) broker(id int32) (*kafkaNode, error) {
	for _, b := range k.brokers {
		if b.id == id {
			return b, nil
		}
	}
	return nil, fmt.Errorf("kafkatest: no broker %d", id)
}

// logTail returns the last n lines of every node's log, for a failed test.
func (k *kafkaCluster) logTail(n int) string {
	var b strings.Builder
	for _, nd := range k.nodes() {
		for _, name := range []string{"server.log", "stdout.log"} {
			data, err := os.ReadFile(filepath.Join(nd.dir, name))
			if err != nil || len(data) == 0 {
				continue
			}
			fmt.Fprintf(&b, "--- Kafka %s node %d %s (last %d lines; whole log in %s)\n%s\n", k.version, nd.id, name, n, nd.dir, lastLines(string(data), n))
		}
	}
	return b.String()
}

// problems returns the WARN and ERROR lines of every node's log (at most n per node).
func (k *kafkaCluster) problems(n int) string {
	var b strings.Builder
	for _, nd := range k.nodes() {
		f, err := os.Open(filepath.Join(nd.dir, "server.log"))
		if err != nil {
			continue
		}
		var lines []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			if l := sc.Text(); strings.Contains(l, "] WARN ") || strings.Contains(l, "] ERROR ") {
				lines = append(lines, l)
			}
		}
		f.Close()
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		if len(lines) > 0 {
			fmt.Fprintf(&b, "--- Kafka %s node %d: last %d warnings and errors (log in %s)\n%s\n", k.version, nd.id, len(lines), nd.dir, strings.Join(lines, "\n"))
		}
	}
	return b.String()
}

// kafkaUUID returns a random Kafka Uuid as its tools print it: 16 bytes, URL-safe base64
// without padding.
func kafkaUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[0] &= 0x7f // never a negative most-significant long, as Kafka's Uuid.randomUuid
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func propertiesText(props map[string]string) string {
	var b strings.Builder
	for _, key := range slices.Sorted(maps.Keys(props)) {
		// Properties files treat backslashes as escapes; none of our values need one.
		fmt.Fprintf(&b, "%s=%s\n", key, props[key])
	}
	return b.String()
}
