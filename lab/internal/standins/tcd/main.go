package tcd

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"
)

// ServerMain is tcd-server [--protocol tcp|http] PORT.
func ServerMain(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("tcd-server", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	protocol := fs.String("protocol", ProtocolTCP, "protocol: tcp or http")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "Usage: tcd-server [--protocol tcp|http] PORT")
		return 1
	}
	if p, err := strconv.ParseUint(fs.Arg(0), 10, 16); err != nil || p == 0 {
		fmt.Fprintf(stderr, "tcd-server: %q is not a port number\n", fs.Arg(0))
		return 1
	}
	if *protocol != ProtocolTCP && *protocol != ProtocolHTTP {
		fmt.Fprintf(stderr, "Invalid Protocol: %s\n", *protocol)
		return 1
	}
	if err := beNice(); err != nil {
		fmt.Fprintf(stderr, "being nice: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", ":"+fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "listen: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Serve(ctx, *protocol, ln, stdout, func() error { return touch(ServerReadyFile) }); err != nil {
		fmt.Fprintf(stderr, "tcd-server: %v\n", err)
		return 1
	}
	return 0
}

// ClientMain is tcd-client [--protocol tcp|http] [--dispatch-interval D]
// [--timeout D] ADDRESS, ADDRESS being host:port for tcp and a URL for http.
func ClientMain(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("tcd-client", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := ClientConfig{DialAttempts: 30}
	fs.StringVar(&cfg.Protocol, "protocol", ProtocolTCP, "protocol: tcp or http")
	fs.DurationVar(&cfg.Interval, "dispatch-interval", 50*time.Millisecond, "interval between two requests (0: 10ms)")
	fs.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "exit when no reply comes within this time")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "Usage: tcd-client [--protocol tcp|http] [--dispatch-interval D] [--timeout D] ADDRESS")
		return 1
	}
	cfg.Addr = fs.Arg(0)
	if cfg.Protocol != ProtocolTCP && cfg.Protocol != ProtocolHTTP {
		fmt.Fprintf(stderr, "Invalid Protocol: %s\n", cfg.Protocol)
		return 1
	}
	if cfg.Timeout <= 0 {
		fmt.Fprintf(stderr, "tcd-client: --timeout %v must be positive\n", cfg.Timeout)
		return 1
	}
	if err := beNice(); err != nil {
		fmt.Fprintf(stderr, "being nice: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, cfg, stdout, func() error { return touch(ClientReadyFile) }); err != nil {
		fmt.Fprintf(stderr, "Error in writer or reader: %v\n", err)
		return 1
	}
	return 0
}
