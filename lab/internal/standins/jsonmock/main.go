package jsonmock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"
)

// imageMiddleware is the only middleware the stand-in has: the image's own.
const imageMiddleware = "/middleware.js"

// Main runs the image's entrypoint: run.sh's settings from the environment
// ($PORT, default 80; $FILE, default the image's database; $MIDDLEWARE), then
// json-server's flags (--port, --host, --middlewares, a database file), flags
// winning over the environment. It serves until SIGTERM or SIGINT.
func Main(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("json-server", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.IntP("port", "p", 80, "port to listen on ($PORT)")
	host := fs.StringP("host", "H", "", "address to listen on; empty: every address")
	middlewares := fs.StringSliceP("middlewares", "m", nil, "middleware files ($MIDDLEWARE); only "+imageMiddleware+" is built in")
	quiet := fs.BoolP("quiet", "q", false, "do not log requests")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !fs.Changed("port") && getenv("PORT") != "" {
		p, err := strconv.Atoi(getenv("PORT"))
		if err != nil || p < 0 || p > 65535 {
			fmt.Fprintf(stderr, "json-server: PORT=%q is not a port number\n", getenv("PORT"))
			return 2
		}
		*port = p
	}
	if !fs.Changed("middlewares") && getenv("MIDDLEWARE") != "" {
		*middlewares = []string{getenv("MIDDLEWARE")}
	}
	for _, m := range *middlewares {
		if m != imageMiddleware {
			fmt.Fprintf(stderr, "json-server: middleware %s: the lab's json-mock has only the image's %s built in\n", m, imageMiddleware)
			return 2
		}
	}
	db := []byte(DefaultDB)
	file := getenv("FILE")
	if fs.NArg() > 0 {
		file = fs.Arg(0)
	}
	if file != "" && file != "/default.json" {
		var err error
		if db, err = os.ReadFile(file); err != nil {
			fmt.Fprintf(stderr, "json-server: %v\n", err)
			return 1
		}
	}
	log := stdout
	if *quiet {
		log = io.Discard
	}
	hostname, _ := os.Hostname()
	srv, err := New(db, hostname, *host == "" || *host == "::", log)
	if err != nil {
		fmt.Fprintf(stderr, "json-server: %s: %v\n", file, err)
		return 1
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintf(stderr, "json-server: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "JSON Server is running on %s\n", ln.Addr())
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 30 * time.Second,
		// The image raises Node's keep-alive timeout to 65s, above Envoy's
		// idle timeout of 60s, so that the proxy, not the server, closes idle
		// connections.
		IdleTimeout: 65 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(shutdown)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "json-server: %v\n", err)
		return 1
	}
	return 0
}
