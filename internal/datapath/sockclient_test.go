package datapath

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// Socket-level balancing acts on the processes of a cgroup, and cgroup v2
// membership belongs to a whole process: a goroutine (or a thread) of the
// test cannot be a client inside the cgroup while the test stays outside.
// So the clients are the test binary run again as a child process, born
// in the cgroup (CLONE_INTO_CGROUP), that runs a script of socket steps in
// a network namespace and reports one JSON line per step.

// sockClientEnv names the child's namespace; its script is in its arguments.
const sockClientEnv = "CILIUM_GO_SOCK_CLIENT_NETNS"

func TestMain(m *testing.M) {
	if ns := os.Getenv(sockClientEnv); ns != "" {
		os.Exit(sockClientMain(ns, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// sockResult is what one step of a client reports.
type sockResult struct {
	Step  string `json:"step"`
	Peer  string `json:"peer,omitempty"`  // getpeername, or the source of the reply
	Reply string `json:"reply,omitempty"` // what the server answered
	Errno string `json:"errno,omitempty"` // the failing call's error, by name
	Err   string `json:"err,omitempty"`   // any other failure
	// Millis is how long the step took.
	Millis int64 `json:"millis"`
}

// sockClientMain runs steps, each "verb" or "verb:address:port":
//
//	tcp:A       connect a TCP socket to A, read one line, report the peer
//	udp:A       send to A from an unconnected UDP socket, report the reply's source
//	udpconn:A   connect the kept UDP socket to A, send, receive; report the peer
//	udprecv     receive on the kept UDP socket (an error is expected)
//	wait        report, then read a line from stdin: the test acts meanwhile
func sockClientMain(ns string, steps []string) int {
	out := json.NewEncoder(os.Stdout)
	in := bufio.NewReader(os.Stdin)
	err := netnamespace.Do(ns, func() error {
		kept := -1
		defer func() {
			if kept >= 0 {
				unix.Close(kept)
			}
		}()
		for _, step := range steps {
			verb, arg, _ := strings.Cut(step, ":")
			start := time.Now()
			var r sockResult
			switch verb {
			case "tcp":
				r = clientTCP(arg)
			case "udp":
				r = clientUDP(arg)
			case "udpconn":
				if kept < 0 {
					fd, err := udpSocket()
					if err != nil {
						return err
					}
					kept = fd
				}
				r = clientUDPConnected(kept, arg)
			case "udprecv":
				r = recvReply(kept)
			case "wait":
				// Reported before waiting: the test acts once it reads it.
				if err := out.Encode(sockResult{Step: step}); err != nil {
					return err
				}
				if _, err := in.ReadString('\n'); err != nil {
					return fmt.Errorf("wait: %w", err)
				}
				continue
			default:
				return fmt.Errorf("unknown step %q", step)
			}
			r.Step = step
			r.Millis = time.Since(start).Milliseconds()
			if err := out.Encode(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func sockaddr(s string) (*unix.SockaddrInet4, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil, err
	}
	return &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}, nil
}

func sockaddrString(sa unix.Sockaddr) string {
	if in4, ok := sa.(*unix.SockaddrInet4); ok {
		return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)).String()
	}
	return fmt.Sprintf("%T", sa)
}

// failed reports a syscall's error by its errno name when it has one.
func failed(call string, err error) sockResult {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return sockResult{Errno: unix.ErrnoName(errno)}
	}
	return sockResult{Err: call + ": " + err.Error()}
}

// withTimeout bounds a socket's receives, so that a lost reply is an
// EAGAIN after a while rather than a hang.
func withTimeout(fd int) error {
	tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
	return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
}

func clientTCP(to string) sockResult {
	sa, err := sockaddr(to)
	if err != nil {
		return sockResult{Err: err.Error()}
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		return failed("socket", err)
	}
	defer unix.Close(fd)
	if err := withTimeout(fd); err != nil {
		return failed("setsockopt", err)
	}
	if err := unix.Connect(fd, sa); err != nil {
		return failed("connect", err)
	}
	peer, err := unix.Getpeername(fd)
	if err != nil {
		return failed("getpeername", err)
	}
	buf := make([]byte, 64)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return failed("read", err)
	}
	return sockResult{Peer: sockaddrString(peer), Reply: strings.TrimSpace(string(buf[:n]))}
}

func udpSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	if err := withTimeout(fd); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("setsockopt: %w", err)
	}
	return fd, nil
}

func clientUDP(to string) sockResult {
	sa, err := sockaddr(to)
	if err != nil {
		return sockResult{Err: err.Error()}
	}
	fd, err := udpSocket()
	if err != nil {
		return sockResult{Err: err.Error()}
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, []byte("ping"), 0, sa); err != nil {
		return failed("sendto", err)
	}
	return recvReply(fd)
}

func clientUDPConnected(fd int, to string) sockResult {
	sa, err := sockaddr(to)
	if err != nil {
		return sockResult{Err: err.Error()}
	}
	if err := unix.Connect(fd, sa); err != nil {
		return failed("connect", err)
	}
	peer, err := unix.Getpeername(fd)
	if err != nil {
		return failed("getpeername", err)
	}
	if _, err := unix.Write(fd, []byte("ping")); err != nil {
		return failed("send", err)
	}
	r := recvReply(fd)
	if r.Errno == "" && r.Err == "" {
		r.Peer = sockaddrString(peer)
	}
	return r
}

// recvReply receives one datagram and reports it with its source.
func recvReply(fd int) sockResult {
	buf := make([]byte, 64)
	n, from, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return failed("recvfrom", err)
	}
	r := sockResult{Reply: string(buf[:n])}
	if from != nil {
		r.Peer = sockaddrString(from)
	}
	return r
}

// sockClient is a running client.
type sockClient struct {
	cmd   *exec.Cmd
	stdin *os.File
	out   *json.Decoder
}

// startSockClient runs steps in a child process in netns ns and, when
// cgroup is not empty, born in that cgroup v2 directory.
func startSockClient(t *testing.T, ns, cgroup string, steps ...string) *sockClient {
	t.Helper()
	cmd := exec.Command(os.Args[0], steps...)
	cmd.Env = append(os.Environ(), sockClientEnv+"="+ns)
	cmd.Stderr = os.Stderr
	if cgroup != "" {
		dir, err := os.Open(cgroup)
		if err != nil {
			t.Fatal(err)
		}
		defer dir.Close()
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = stdinR
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start client: %v", err)
	}
	stdinR.Close()
	c := &sockClient{cmd: cmd, stdin: stdinW, out: json.NewDecoder(stdout)}
	// The child must be gone before its cgroup can be removed.
	t.Cleanup(func() {
		c.stdin.Close()
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	return c
}

// next is the client's next step's result.
func (c *sockClient) next(t *testing.T) sockResult {
	t.Helper()
	var r sockResult
	if err := c.out.Decode(&r); err != nil {
		t.Fatalf("client output: %v", err)
	}
	return r
}

// resume ends the client's wait step.
func (c *sockClient) resume(t *testing.T) {
	t.Helper()
	if _, err := c.stdin.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
}

// runSockClient runs steps to the end and returns their results.
func runSockClient(t *testing.T, ns, cgroup string, steps ...string) []sockResult {
	t.Helper()
	c := startSockClient(t, ns, cgroup, steps...)
	out := make([]sockResult, len(steps))
	for i := range steps {
		out[i] = c.next(t)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("client: %v", err)
	}
	return out
}
