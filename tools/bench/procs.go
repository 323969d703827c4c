package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/workertest"
)

// runner lets the test helpers (kafkatest, workertest) run outside a test: Fatalf panics
// with a benchFailure that try and catch turn back into an error, cleanups run at close.
type runner struct{ cleanups []func() }

type benchFailure string

func (r *runner) Helper() {}
func (r *runner) Fatalf(format string, args ...any) {
	panic(benchFailure(fmt.Sprintf(format, args...)))
}
func (r *runner) Skipf(format string, args ...any) { r.Fatalf(format, args...) }
func (r *runner) Logf(format string, args ...any)  { log.Printf(format, args...) }
func (r *runner) Cleanup(f func())                 { r.cleanups = append(r.cleanups, f) }
func (r *runner) Failed() bool                     { return false }

func (r *runner) close() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.cleanups = nil
}

// catch runs f and returns the message of a Fatalf inside it ("" when none).
func (r *runner) catch(f func()) (msg string) {
	defer func() {
		if v := recover(); v != nil {
			bf, ok := v.(benchFailure)
			if !ok {
				panic(v)
			}
			msg = string(bf)
		}
	}()
	f()
	return ""
}

func (r *runner) try(f func()) string { return r.catch(f) }

func (r *runner) check(err error, what string) {
	if err != nil {
		r.Fatalf("%s: %v", what, err)
	}
}

// buildWorker compiles the worker binary once for the whole run.
func buildWorker() (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "kafkamirror-bench-")
	if err != nil {
		return "", nil, err
	}
	bin, err = workertest.Build(dir)
	return bin, func() { os.RemoveAll(dir) }, err
}

// cluster is a source or destination cluster in processes of its own.
type cluster struct {
	addrs   []string
	pids    []int  // its processes, whose CPU the bench reads
	compact func() // makes the log cleaner run over what was written (kfake only)
}

// cpu is the CPU time c's processes have used so far.
func (c *cluster) cpu(r *runner) time.Duration {
	var sum time.Duration
	for _, pid := range c.pids {
		d, err := cpuTime(pid)
		r.check(err, "a cluster's CPU")
		sum += d
	}
	return sum
}

// kfakeChildArg makes this binary serve one kfake cluster (strict mode) instead of
// benchmarking: it prints "addrs host:port,..." and then answers "compact" lines with "ok"
// until its standard input closes. It compacts the kfake way (kafkatest's Cleaner, which
// reshapes the result like Apache Kafka's, answers every later fetch through a client of its
// own, and that would be measured too).
const kfakeChildArg = "serve-kfake"

func serveKfake(in io.Reader, out io.Writer) int {
	r := &runner{}
	defer r.close()
	if msg := r.try(func() {
		c, err := kafkatest.Start()
		r.check(err, "starting kfake")
		r.Cleanup(c.Close)
		fmt.Fprintf(out, "addrs %s\n", strings.Join(c.Addrs(), ","))
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			if sc.Text() == "compact" {
				c.Fake().Compact()
				fmt.Fprintln(out, "ok")
			}
		}
	}); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
		return 1
	}
	return 0
}

// startKfake starts this binary as a kfake child process.
func startKfake(r *runner) *cluster {
	self, err := os.Executable()
	r.check(err, "finding this binary")
	cmd := exec.Command(self, kfakeChildArg)
	stdin, err := cmd.StdinPipe()
	r.check(err, "kfake stdin")
	stdout, err := cmd.StdoutPipe()
	r.check(err, "kfake stdout")
	cmd.Stderr = os.Stderr
	r.check(cmd.Start(), "starting kfake")
	r.Cleanup(func() {
		stopProcess(cmd, func() { stdin.Close() }) // the child closes its cluster and exits
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) string {
		select {
		case l, ok := <-lines:
			if !ok {
				r.Fatalf("the kfake process ended while %s", what)
			}
			return l
		case <-time.After(2 * time.Minute):
			r.Fatalf("the kfake process did not answer within 2 minutes while %s", what)
		}
		return ""
	}
	addrs, ok := strings.CutPrefix(next("starting"), "addrs ")
	if !ok {
		r.Fatalf("unexpected first line from the kfake process")
	}
	return &cluster{addrs: strings.Split(addrs, ","), pids: []int{cmd.Process.Pid}, compact: func() {
		_, err := fmt.Fprintln(stdin, "compact")
		r.check(err, "asking kfake to compact")
		if l := next("compacting"); l != "ok" {
			r.Fatalf("kfake answered %q to compact", l)
		}
	}}
}

// kafkaServerJVM are the JVM options Apache Kafka's kafka-server-start.sh and
// kafka-run-class.sh give a broker: the bench measures brokers as users run them, not with
// the tests' small heap and quick-starting JIT.
var kafkaServerJVM = []string{
	"-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
}

// startKafka starts an Apache Kafka cluster of brokers (each JVM its own process).
func startKafka(r *runner, version string, brokers int) *cluster {
	c, err := kafkatest.Start(kafkatest.Kafka(version), kafkatest.Brokers(brokers), kafkatest.JVMOptions(kafkaServerJVM...))
	r.check(err, "starting Apache Kafka "+version)
	r.Cleanup(c.Close)
	return &cluster{addrs: c.Addrs(), pids: c.Processes()}
}

// stopProcess asks cmd's process to end with ask and kills it when it has not ended 30 s later.
func stopProcess(cmd *exec.Cmd, ask func()) {
	ask()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// cpuTime is the user plus system CPU time a process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	// utime and stime are fields 14 and 15 of stat(5), in clock ticks: 100 per second on
	// Linux (USER_HZ), whatever the kernel's own tick rate.
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// mirrorMaker runs MirrorMaker 2 in dedicated mode from src to dst for topic, re-producing
// with codec ("zstd" or "none"); it writes the destination topic "src.<topic>". The returned
// stop ends it.
func mirrorMaker(r *runner, version string, src, dst *cluster, topic, codec string, replicas int16) (stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	libs, err := kafkatest.FetchMirrorMaker(ctx, version)
	r.check(err, "fetching MirrorMaker 2")
	dir, err := os.MkdirTemp("", "kafkamirror-bench-mm2-")
	r.check(err, "MirrorMaker 2 folder")
	props := strings.Join([]string{
		"clusters = src, dst",
		"src.bootstrap.servers = " + strings.Join(src.addrs, ","),
		"dst.bootstrap.servers = " + strings.Join(dst.addrs, ","),
		"src->dst.enabled = true",
		"src->dst.topics = " + topic,
		"dst->src.enabled = false",
		"dst.producer.compression.type = " + codec,
		"tasks.max = 2",
		"refresh.topics.interval.seconds = 1",
		"emit.heartbeats.enabled = false",
		"emit.checkpoints.enabled = false",
		"sync.group.offsets.enabled = false",
		"sync.topic.configs.enabled = false",
		"sync.topic.acls.enabled = false",
	}, "\n") + "\n"
	for _, key := range []string{"replication.factor", "checkpoints.topic.replication.factor", "heartbeats.topic.replication.factor",
		"offset-syncs.topic.replication.factor", "offset.storage.replication.factor", "status.storage.replication.factor",
		"config.storage.replication.factor"} {
		props += fmt.Sprintf("%s = %d\n", key, replicas)
	}
	file := filepath.Join(dir, "mm2.properties")
	r.check(os.WriteFile(file, []byte(props), 0o644), "writing mm2.properties")
	logFile, err := os.Create(filepath.Join(dir, "mm2.log"))
	r.check(err, "MirrorMaker 2 log")
	cmd := exec.Command("java", "-Xmx1g", "-cp", filepath.Join(libs, "*"), "org.apache.kafka.connect.mirror.MirrorMaker", file)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	r.check(cmd.Start(), "starting MirrorMaker 2")
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		stopProcess(cmd, func() { _ = cmd.Process.Signal(syscall.SIGTERM) })
		logFile.Close()
		os.RemoveAll(dir)
	}
	r.Cleanup(stop)
	return stop
}

// resetPeakRSS starts a new high-water mark of a process's resident memory (clear_refs 5,
// Linux 4.0 and later).
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// peakRSS is the most resident memory of a process, in bytes, since it started or since
// resetPeakRSS (VmHWM of /proc/<pid>/status).
func peakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("unreadable VmHWM in /proc/%d/status: %q", pid, v)
			}
			return kib << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
