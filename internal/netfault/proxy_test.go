package netfault

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestProxyCutsAndHeals: a proxied connection forwards; during a cut
// nothing passes either way, on open or new connections; after Heal the
// connections that lost traffic are closed and new ones forward again.
func TestProxyCutsAndHeals(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write(append(sc.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	p, err := New(echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	roundTrip := func(c net.Conn, msg string) error {
		if _, err := c.Write([]byte(msg + "\n")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		if line != msg+"\n" {
			t.Fatalf("echo of %q: %q", msg, line)
		}
		return nil
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	before := dial()
	defer before.Close()
	if err := roundTrip(before, "one"); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if err := roundTrip(before, "two"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an open connection during a cut: %v, want a timeout", err)
	}
	during := dial() // a partition drops packets: the dial itself is not refused
	defer during.Close()
	if err := roundTrip(during, "three"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a new connection during a cut: %v, want a timeout", err)
	}
	p.Heal()
	for _, c := range []net.Conn{before, during} {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a connection that lost traffic is not closed by Heal: %v", err)
		}
	}
	after := dial()
	defer after.Close()
	if err := roundTrip(after, "four"); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}
