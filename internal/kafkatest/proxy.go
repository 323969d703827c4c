package kafkatest

// A loopback TCP proxy in front of a cluster's brokers that can blackhole them, as a network
// partition or a dead switch would: connections are still accepted, but nothing is forwarded
// either way until the proxy is healed, and then everything held is. Clients connected
// through it reach every broker through it: the broker addresses in Metadata,
// FindCoordinator and DescribeCluster answers are rewritten to the proxy's.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxProxyFrame bounds one request or answer the proxy holds; the test clusters' fetches
// and produces stay far below it.
const maxProxyFrame = 256 << 20

// Proxy forwards a cluster's traffic and can blackhole it.
type Proxy struct {
	addrs []string
	// byBroker maps a broker's host:port to the proxy's listener for it.
	byBroker map[string]*net.TCPAddr

	mu    sync.Mutex
	gate  chan struct{} // closed while traffic flows
	conns map[net.Conn]struct{}
	lns   []net.Listener
	done  chan struct{}
}

// NewProxy starts a proxy in front of every broker of c; it is closed when the test ends.
// Clients use Addrs as their bootstrap servers.
func NewProxy(t TB, c *Cluster) *Proxy {
	t.Helper()
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{byBroker: map[string]*net.TCPAddr{}, gate: gate, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	t.Cleanup(p.close)
	for _, broker := range c.Addrs() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("kafkatest: proxy listener: %v", err)
		}
		p.lns = append(p.lns, ln)
		p.addrs = append(p.addrs, ln.Addr().String())
		p.byBroker[broker] = ln.Addr().(*net.TCPAddr)
		go p.serve(ln, broker)
	}
	return p
}

// Addrs are the proxy's addresses, one per broker.
func (p *Proxy) Addrs() []string { return append([]string(nil), p.addrs...) }

// Blackhole stops forwarding, in both directions, on every connection, new ones included.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // already
	}
}

// Heal forwards again, what was held first.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// pass waits while the proxy is blackholed; false when it is closed.
func (p *Proxy) pass() bool {
	p.mu.Lock()
	gate := p.gate
	p.mu.Unlock()
	select {
	case <-gate:
		return true
	case <-p.done:
		return false
	}
}

func (p *Proxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return
	default:
	}
	close(p.done)
	for _, ln := range p.lns {
		ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
}

// track registers a connection for close; false when the proxy is closed already.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return false
	default:
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) serve(ln net.Listener, broker string) {
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(client, broker)
	}
}

// pipe forwards one client connection frame by frame, remembering each request's key and
// version by correlation id so that answers with broker addresses can be rewritten.
func (p *Proxy) pipe(client net.Conn, broker string) {
	server, err := net.Dial("tcp", broker)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		client.Close()
		server.Close()
		return
	}
	defer p.untrack(client, server)
	var mu sync.Mutex
	pending := map[int32][2]int16{} // correlation id → key, version
	errc := make(chan error, 2)
	go func() {
		errc <- p.forward(client, server, func(frame []byte) []byte {
			if len(frame) >= 8 {
				mu.Lock()
				pending[int32(binary.BigEndian.Uint32(frame[4:]))] = [2]int16{int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))}
				mu.Unlock()
			}
			return frame
		})
	}()
	go func() {
		errc <- p.forward(server, client, func(frame []byte) []byte {
			if len(frame) < 4 {
				return frame
			}
			corr := int32(binary.BigEndian.Uint32(frame))
			mu.Lock()
			kv, ok := pending[corr]
			delete(pending, corr)
			mu.Unlock()
			if !ok {
				return frame
			}
			return p.rewrite(kv[0], kv[1], frame)
		})
	}()
	<-errc // either side ending ends both
}

// forward copies size-prefixed frames from src to dst through edit, holding each while the
// proxy is blackholed.
func (p *Proxy) forward(src, dst net.Conn, edit func([]byte) []byte) error {
	var size [4]byte
	for {
		if _, err := io.ReadFull(src, size[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > maxProxyFrame {
			return fmt.Errorf("kafkatest proxy: a %d byte frame", n)
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(src, frame); err != nil {
			return err
		}
		frame = edit(frame)
		if !p.pass() {
			return errors.New("kafkatest proxy: closed")
		}
		out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(frame)), uint32(len(frame)))
		if _, err := dst.Write(append(out, frame...)); err != nil {
			return err
		}
	}
}

// rewrite points the broker addresses of an answer at the proxy; other answers, and any it
// cannot parse, pass unchanged.
func (p *Proxy) rewrite(key, version int16, frame []byte) []byte {
	switch key {
	case int16(kmsg.Metadata), int16(kmsg.FindCoordinator), int16(kmsg.DescribeCluster):
	default:
		return frame
	}
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	header := 4 // correlation id
	if req.IsFlexible() {
		// The header's tagged fields: a count, then each tag's number, size and bytes.
		count, n := binary.Uvarint(frame[header:])
		if n <= 0 {
			return frame
		}
		header += n
		for range count {
			_, n := binary.Uvarint(frame[header:])
			if n <= 0 {
				return frame
			}
			header += n
			size, n := binary.Uvarint(frame[header:])
			if n <= 0 || size > uint64(len(frame)-header-n) {
				return frame
			}
			header += n + int(size)
		}
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := resp.ReadFrom(frame[header:]); err != nil {
		return frame
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = p.proxied(r.Brokers[i].Host, r.Brokers[i].Port)
		}
	case *kmsg.FindCoordinatorResponse:
		r.Host, r.Port = p.proxied(r.Host, r.Port)
		for i := range r.Coordinators {
			r.Coordinators[i].Host, r.Coordinators[i].Port = p.proxied(r.Coordinators[i].Host, r.Coordinators[i].Port)
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = p.proxied(r.Brokers[i].Host, r.Brokers[i].Port)
		}
	}
	return resp.AppendTo(append([]byte(nil), frame[:header]...))
}

// proxied is the proxy's address for a broker's, or the broker's when it has none.
func (p *Proxy) proxied(host string, port int32) (string, int32) {
	if a, ok := p.byBroker[net.JoinHostPort(host, strconv.Itoa(int(port)))]; ok {
		return a.IP.String(), int32(a.Port)
	}
	return host, port
}
