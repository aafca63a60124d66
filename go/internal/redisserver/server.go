// Package redisserver starts one redis-server on a free loopback port for
// a test, in a directory of its own, and stops it when the test ends: the
// Go side of the test support every face has (tests/support).
package redisserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Server is one running redis-server.
type Server struct {
	Port     int
	cmd      *exec.Cmd
	sentinel bool
}

// URL is the server's redis:// URL, or a Sentinel's redis+sentinel:// URL
// of the master it monitors.
func (s *Server) URL() string {
	if s.sentinel {
		return fmt.Sprintf("redis+sentinel://127.0.0.1:%d/mymaster", s.Port)
	}
	return fmt.Sprintf("redis://127.0.0.1:%d", s.Port)
}

// Start starts a server (Debian's redis-server, or $RLOCK_REDIS_SERVER),
// stopped when t ends; it fails t if none answers PING within 10 s.
func Start(t testing.TB) *Server {
	t.Helper()
	s, stop, err := start(t.TempDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s
}

// StartCluster starts a Redis Cluster of three masters (every slot
// assigned, its state ok), stopped when t ends.
func StartCluster(t testing.TB) []*Server {
	t.Helper()
	var nodes []*Server
	var addrs []string
	for i := 0; i < 3; i++ {
		dir := t.TempDir()
		s, stop, err := start(func() string { return dir }, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		nodes = append(nodes, s)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", s.Port))
	}
	create := exec.Command("redis-cli", append([]string{"--cluster", "create"}, append(addrs, "--cluster-replicas", "0", "--cluster-yes")...)...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range nodes {
		for deadline := time.Now().Add(20 * time.Second); ; {
			if info := n.lines(2, "CLUSTER", "INFO"); len(info) == 2 && info[1] == "cluster_state:ok" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cluster never came to state ok on port %d", n.Port)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}

// StartSentinel starts a Sentinel that monitors master as "mymaster",
// stopped when t ends; its URL() is the redis+sentinel:// URL of that master.
func StartSentinel(t testing.TB, master *Server) *Server {
	t.Helper()
	dir := t.TempDir()
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", port))
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 %d 1\n", port, master.Port)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		binary := os.Getenv("RLOCK_REDIS_SERVER")
		if binary == "" {
			binary = "redis-server"
		}
		cmd := exec.Command(binary, conf, "--sentinel")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s := &Server{Port: port, cmd: cmd, sentinel: true}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			select {
			case <-exited:
				deadline = time.Time{}
				continue
			default:
			}
			// Ready once it names the master.
			if lines := s.lines(1, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"); len(lines) == 1 && lines[0] == "*2" {
				return s
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Fatal("redis-server --sentinel did not start on a free port in 5 tries")
	return nil
}

// StartForRun starts a server for a whole test binary (TestMain, whose
// examples read $REDIS_URL): stop it when the run ends.
func StartForRun() (*Server, func(), error) {
	dir, err := os.MkdirTemp("", "redisserver")
	if err != nil {
		return nil, nil, err
	}
	s, stop, err := start(func() string { return dir })
	return s, func() { stop(); os.RemoveAll(dir) }, err
}

func start(tempDir func() string, extra ...string) (*Server, func(), error) {
	binary := os.Getenv("RLOCK_REDIS_SERVER")
	if binary == "" {
		binary = "redis-server"
	}
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			return nil, nil, err
		}
		args := append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", tempDir()}, extra...)
		cmd := exec.Command(binary, args...)
		if err := cmd.Start(); err != nil {
			return nil, nil, fmt.Errorf("redis-server must be installed (make test installs it): %w", err)
		}
		s := &Server{Port: port, cmd: cmd}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() { _ = cmd.Process.Kill(); <-exited }
		// Another test may have taken the port in between: the server then
		// exits, and a fresh port is tried.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			select {
			case <-exited:
				deadline = time.Time{}
				continue
			default:
			}
			if s.Do("PING") == "+PONG" {
				return s, stop, nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		stop()
	}
	return nil, nil, fmt.Errorf("redis-server did not start on a free port in 5 tries")
}

// Do sends one command and returns the first line of its reply ("" when
// the server did not answer).
func (s *Server) Do(args ...string) string {
	lines := s.lines(1, args...)
	if len(lines) == 0 {
		return ""
	}
	return lines[0]
}

// At is the server a redis://host:port URL names, already running (for a
// worker told $REDIS_URL).
func At(url string) (*Server, error) {
	var port int
	if _, err := fmt.Sscanf(url[strings.LastIndex(url, ":")+1:], "%d", &port); err != nil {
		return nil, fmt.Errorf("no port in %q", url)
	}
	return &Server{Port: port}, nil
}

// Value sends one command and returns its reply's value: a bulk string's
// bytes, an integer's or a status's text; ok false for a nil reply, an
// error reply or no answer.
func (s *Server) Value(args ...string) (string, bool) {
	var value string
	ok := false
	s.exchange(func(r *bufio.Reader) {
		head, err := r.ReadString('\n')
		head = strings.TrimRight(head, "\r\n")
		switch {
		case err != nil || head == "" || head == "$-1" || head[0] == '-':
		case head[0] == '$': // a bulk string: its bytes on the next line
			var n int
			fmt.Sscanf(head, "$%d", &n)
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(r, buf); err == nil {
				value, ok = string(buf[:n]), true
			}
		default: // :N, +OK
			value, ok = head[1:], true
		}
	}, args...)
	return value, ok
}

// Subscribers is how many connections are subscribed to channel (-1 when
// the server did not answer).
func (s *Server) Subscribers(channel string) int {
	// *2, $len, the channel, :N
	lines := s.lines(4, "PUBSUB", "NUMSUB", channel)
	n := -1
	if len(lines) == 4 {
		fmt.Sscanf(lines[3], ":%d", &n)
	}
	return n
}

// lines sends one command and reads the first n lines of its reply.
func (s *Server) lines(n int, args ...string) []string {
	var lines []string
	s.exchange(func(r *bufio.Reader) {
		for len(lines) < n {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			lines = append(lines, strings.TrimRight(line, "\r\n"))
		}
	}, args...)
	return lines
}

// exchange sends one command on a connection of its own and lets read
// read the reply (nothing when the server does not answer).
func (s *Server) exchange(read func(*bufio.Reader), args ...string) {
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port), time.Second)
	if err != nil {
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return
	}
	read(bufio.NewReader(conn))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
