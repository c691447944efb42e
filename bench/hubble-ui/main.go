// Command hubble-ui benchmarks Hubble UI's page in a real browser: the
// flows of a namespace of 100 workloads, 10,000 a second, written into
// two nodes' Hubble rings and carried by the agents' Observer servers,
// hubble-relay and hubble-ui's backend (all the real code, on loopback)
// to the page in headless Chromium, for a minute.
//
//   - Time to the first complete map: from opening the page to every
//     card of the load drawn.
//   - Frame time: the page's frames (requestAnimationFrame) while the
//     flows stream, p50 and p95 (target: p95 under 50 ms), against the
//     same page with no flows, in the same run.
//   - Memory: the page's JavaScript heap after a collection, each ten
//     seconds once the window of flows is full; flat means the last
//     within 10 % of the first (target).
//
// It needs Chromium (hack/deps.sh test installs it).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"
)

const (
	dialTimeout = 5 * time.Second
	sortDrain   = time.Second
)

func main() {
	rate := flag.Int("rate", 10_000, "flows a second through the relay")
	duration := flag.Duration("duration", time.Minute, "how long the flows stream")
	workloads := flag.Int("workloads", 100, "workloads in the namespace")
	screenshot := flag.String("screenshot", "", "a PNG of the page at the end of the load, to look at")
	serve := flag.Bool("serve", false, "serve the page with the load until interrupted, and print its URL, for a look by hand")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l := &load{namespace: "bench", workloads: *workloads}
	p, err := startPipeline(ctx, []string{"node-1", "node-2"}, l.namespace, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hubble-ui bench:", err)
		os.Exit(1)
	}
	defer p.stop()
	if *serve {
		fmt.Println(p.url)
		l.run(ctx, *rate, p.nodes)
		return
	}
	if err := run(ctx, p, l, *rate, *duration, *screenshot); err != nil {
		fmt.Fprintln(os.Stderr, "hubble-ui bench:", err)
		os.Exit(1)
	}
}
