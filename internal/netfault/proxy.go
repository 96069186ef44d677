// Package netfault injects network faults between a Kafka client and its
// broker, for the fault campaign (internal/soak) and tests.
package netfault

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// Proxy stands between one client and the broker, so that a test can cut
// that client alone off the broker (a network partition) while it keeps
// running and others still reach it. The client dials the proxy for every
// broker address (kgo.Dialer; countsvc --broker-proxy).
//
// Cut drops the traffic of every open connection and of every new one, as
// a partition drops packets: the instance's requests time out rather than
// fail at once. Heal closes the connections that lost traffic (their
// streams are broken; the client dials again) and forwards new ones.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[*link]struct{}
	wg     sync.WaitGroup
}

// link is one proxied connection: the instance's side and the broker's.
type link struct {
	client, server net.Conn
	lost           bool // traffic was dropped during a cut
}

// New listens on a free loopback port and forwards to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the instance dials.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	l := &link{client: client}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		client.Close()
		return
	}
	p.conns[l] = struct{}{}
	cut := p.cut
	if cut {
		l.lost = true
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
		client.Close()
		if l.server != nil {
			l.server.Close()
		}
	}()
	if cut {
		// Dialled during a partition: the handshake reaches nothing.
		// Swallow what the client sends until Heal or Close ends it.
		p.pump(l, client, nil)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	server, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		return // the broker is down: the client sees the connection close
	}
	p.mu.Lock()
	l.server = server
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.pump(l, server, client)
		client.Close()
	}()
	p.pump(l, client, server)
	server.Close()
	<-done
}

// pump copies from src to dst (nil: nowhere) and drops what it reads while
// the proxy is cut.
func (p *Proxy) pump(l *link, src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := p.cut || l.lost || dst == nil
			if p.cut {
				l.lost = true
			}
			p.mu.Unlock()
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut starts a partition: from now on nothing passes in either direction.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	for l := range p.conns {
		l.lost = true
	}
	p.mu.Unlock()
}

// Heal ends a partition: the connections it broke are closed, and new
// ones are forwarded again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	var lost []net.Conn
	for l := range p.conns {
		if l.lost {
			lost = append(lost, l.sides()...)
		}
	}
	p.mu.Unlock()
	for _, c := range lost {
		c.Close()
	}
}

// sides are the link's open connections; p.mu held.
func (l *link) sides() []net.Conn {
	if l.server == nil {
		return []net.Conn{l.client}
	}
	return []net.Conn{l.client, l.server}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	var all []net.Conn
	for l := range p.conns {
		all = append(all, l.sides()...)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range all {
		c.Close()
	}
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
