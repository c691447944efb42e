package relay

import (
	"context"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Limits bound the streams (GetFlows, and every other streaming call)
// the relay serves at once: each holds a stream to every node and
// buffers, and one client must not take what the others need. Unary
// calls are not counted: they end within the dial timeout.
type Limits struct {
	// MaxStreams bounds the streams of all clients together.
	MaxStreams int
	// MaxStreamsPerClient bounds the streams of one client: the subject
	// of its verified certificate under mutual TLS, else its address.
	MaxStreamsPerClient int
}

// Validate names the bad bound.
func (l Limits) Validate() error {
	switch {
	case l.MaxStreams < 1:
		return fmt.Errorf("--max-concurrent-streams %d: want 1 or more", l.MaxStreams)
	case l.MaxStreamsPerClient < 1 || l.MaxStreamsPerClient > l.MaxStreams:
		return fmt.Errorf("--max-concurrent-streams-per-client %d: want 1 to --max-concurrent-streams (%d)", l.MaxStreamsPerClient, l.MaxStreams)
	}
	return nil
}

// streamCounter counts the open streams, in total and by client.
type streamCounter struct {
	limits Limits

	mu       sync.Mutex
	total    int
	byClient map[string]int
}

// StreamInterceptor refuses a stream beyond the limits with
// ResourceExhausted, naming the limit.
func (l Limits) StreamInterceptor() grpc.StreamServerInterceptor {
	c := &streamCounter{limits: l, byClient: map[string]int{}}
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		who := clientOf(ss.Context())
		if err := c.acquire(who); err != nil {
			return err
		}
		defer c.release(who)
		return handler(srv, ss)
	}
}

func (c *streamCounter) acquire(who string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.byClient[who]; n >= c.limits.MaxStreamsPerClient {
		return status.Errorf(codes.ResourceExhausted, "%s has %d streams open, the most one client may have (--max-concurrent-streams-per-client)", who, n)
	}
	if c.total >= c.limits.MaxStreams {
		return status.Errorf(codes.ResourceExhausted, "the relay serves %d streams, the most it serves at once (--max-concurrent-streams)", c.total)
	}
	c.total++
	c.byClient[who]++
	return nil
}

func (c *streamCounter) release(who string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.byClient[who]--; c.byClient[who] == 0 {
		delete(c.byClient, who)
	}
}

// clientOf names the client of ctx: its certificate when the server
// verified one (so that a client counts once however many connections,
// and from wherever, it opens), else its address without the port.
func clientOf(ctx context.Context) string {
	p, ok := grpcpeer.FromContext(ctx)
	if !ok {
		return "an unknown client"
	}
	if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 && len(info.State.VerifiedChains[0]) > 0 {
		return "the client certificate " + info.State.VerifiedChains[0][0].Subject.String()
	}
	if p.Addr == nil {
		return "an unknown client"
	}
	addr := p.Addr.String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	return "the client at " + addr
}
