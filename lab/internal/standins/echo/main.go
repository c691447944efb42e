package echo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

// Main runs the image's entrypoint with the server's flags until SIGTERM or
// SIGINT. An unknown flag is refused (exit 2) with pflag's message, which
// names it.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseFlags(args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "server: %v\n", err)
		return 2
	}
	hostname, _ := os.Hostname()
	s, err := New(cfg, hostname, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "server: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := s.Run(ctx, ListenAll); err != nil {
		fmt.Fprintf(stderr, "server: %v\n", err)
		return 1
	}
	return 0
}
