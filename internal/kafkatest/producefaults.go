package kafkatest

// Produce requests whose outcome the client never learns, made on the client's own
// connections (kgo.Dialer): the connection between a client and the brokers drops with a
// produce on it, either before the broker got it (the request is delivered later, on its own,
// as a congested network path or a dying proxy would) or after (the answer is lost).

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProduceFaults breaks the next produce request of a client dialed through it.
type ProduceFaults struct {
	mu        sync.Mutex
	hold      time.Duration // > 0: hold the next produce this long, then deliver it
	drop      bool          // drop the next produce's answer
	fired     atomic.Int32
	delivered atomic.Int32
}

// HoldNext makes the next produce request's connection fail at once for the client while the
// request itself reaches the broker d later, its answer discarded.
func (f *ProduceFaults) HoldNext(d time.Duration) {
	f.mu.Lock()
	f.hold, f.drop = d, false
	f.mu.Unlock()
}

// DropNextAnswer lets the next produce request through and fails its connection instead of
// returning the answer.
func (f *ProduceFaults) DropNextAnswer() {
	f.mu.Lock()
	f.hold, f.drop = 0, true
	f.mu.Unlock()
}

// Fired counts the produce requests broken so far.
func (f *ProduceFaults) Fired() int { return int(f.fired.Load()) }

// Delivered counts the held produce requests the broker has answered.
func (f *ProduceFaults) Delivered() int { return int(f.delivered.Load()) }

// take returns and disarms the fault for a produce request.
func (f *ProduceFaults) take() (hold time.Duration, drop bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hold, drop = f.hold, f.drop
	f.hold, f.drop = 0, false
	return hold, drop
}

// Opt is the client option that dials through f.
func (f *ProduceFaults) Opt() kgo.Opt {
	var d net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &faultConn{Conn: c, f: f, closed: make(chan struct{}), dropCorr: -1}, nil
	})
}

// maxFaultFrame bounds an answer read; the test clusters' answers stay far below it.
const maxFaultFrame = 256 << 20

var errFaultDropped = errors.New("kafkatest: connection dropped with a produce on it")

// faultConn splits the client's writes and the broker's answers into frames.
type faultConn struct {
	net.Conn
	f *ProduceFaults

	wbuf []byte // a request not complete yet

	mu       sync.Mutex
	dropCorr int64 // correlation id whose answer ends the connection; -1 if none
	closed   chan struct{}
	once     sync.Once
	rframe   []byte      // the rest of an answer being read
	held     atomic.Bool // a held request owns the connection
}

func (c *faultConn) fail() { c.once.Do(func() { close(c.closed) }) }

func (c *faultConn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

func (c *faultConn) Write(b []byte) (int, error) {
	if c.isClosed() {
		return 0, errFaultDropped
	}
	c.wbuf = append(c.wbuf, b...)
	for len(c.wbuf) >= 4+8 {
		size := int(binary.BigEndian.Uint32(c.wbuf))
		if size < 8 || len(c.wbuf) < 4+size {
			break
		}
		frame := c.wbuf[: 4+size : 4+size]
		c.wbuf = c.wbuf[4+size:]
		if int16(binary.BigEndian.Uint16(frame[4:])) == int16(kmsg.Produce) {
			hold, drop := c.f.take()
			switch {
			case hold > 0:
				c.f.fired.Add(1)
				c.held.Store(true)
				c.fail()
				c.Conn.SetReadDeadline(time.Now()) // the client's pending read fails now
				go c.deliverLate(frame, hold)
				return len(b), nil
			case drop:
				c.f.fired.Add(1)
				c.mu.Lock()
				c.dropCorr = int64(int32(binary.BigEndian.Uint32(frame[8:])))
				c.mu.Unlock()
			}
		}
		if _, err := c.Conn.Write(frame); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// deliverLate sends a held request on the connection the client gave up, then closes it
// once the broker answered (the answer is nobody's).
func (c *faultConn) deliverLate(frame []byte, after time.Duration) {
	time.Sleep(after)
	defer c.Conn.Close()
	c.Conn.SetReadDeadline(time.Time{})
	if _, err := c.Conn.Write(frame); err != nil {
		return
	}
	var size [4]byte
	for {
		if _, err := io.ReadFull(c.Conn, size[:]); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, c.Conn, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
			return
		}
		c.f.delivered.Add(1)
	}
}

func (c *faultConn) Read(b []byte) (int, error) {
	if c.isClosed() {
		return 0, errFaultDropped
	}
	if len(c.rframe) == 0 {
		var size [4]byte
		if _, err := io.ReadFull(c.Conn, size[:]); err != nil {
			return 0, err
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > maxFaultFrame || n < 4 {
			return 0, errors.New("kafkatest: implausible answer size")
		}
		frame := make([]byte, 4+n)
		copy(frame, size[:])
		if _, err := io.ReadFull(c.Conn, frame[4:]); err != nil {
			return 0, err
		}
		c.mu.Lock()
		drop := int64(int32(binary.BigEndian.Uint32(frame[4:]))) == c.dropCorr
		c.mu.Unlock()
		if drop {
			c.fail()
			c.Conn.Close()
			return 0, errFaultDropped
		}
		c.rframe = frame
	}
	n := copy(b, c.rframe)
	c.rframe = c.rframe[n:]
	return n, nil
}

func (c *faultConn) Close() error {
	c.fail()
	if c.held.Load() {
		return nil // deliverLate closes it
	}
	return c.Conn.Close()
}
