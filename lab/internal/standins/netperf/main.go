package netperf

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ignored are test options that change nothing the stand-in measures: whether
// to allow routing (-R), socket buffer and receive sizes, Nagle (-D, no value).
var ignored = map[string]bool{"-R": true, "-s": true, "-S": true, "-M": true, "-D": true}

// parseArgs reads netperf's command line: global options, then after "--" the
// test's. It names the first option it does not take.
func parseArgs(args []string) (Config, []string, bool, error) {
	cfg := Config{Host: "localhost", Port: DefaultPort, Test: TCPStream, Duration: 10 * time.Second,
		ReqSize: 1, RspSize: 1, Network: "tcp"}
	sel := defaultSelectors
	banner := true
	msgSet := false
	testOpts := false
	for i := 0; i < len(args); i++ {
		opt := args[i]
		if opt == "--" && !testOpts {
			testOpts = true
			continue
		}
		value := func() (string, error) {
			if len(opt) > 2 && strings.HasPrefix(opt, "-") {
				v := opt[2:]
				opt = opt[:2]
				return v, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("option %s needs a value", opt)
			}
			i++
			return args[i], nil
		}
		var err error
		var v string
		switch key := opt[:min(2, len(opt))]; {
		case !testOpts && key == "-4":
			cfg.Network = "tcp4"
		case !testOpts && key == "-6":
			cfg.Network = "tcp6"
		case !testOpts && key == "-H":
			if v, err = value(); err == nil {
				cfg.Host, _, _ = strings.Cut(v, ",")
			}
		case !testOpts && key == "-p":
			if v, err = value(); err == nil {
				p, _, _ := strings.Cut(v, ",")
				cfg.Port, err = strconv.Atoi(p)
				if err != nil || cfg.Port < 1 || cfg.Port > 65535 {
					err = fmt.Errorf("-p %s: not a port", v)
				}
			}
		case !testOpts && key == "-t":
			if v, err = value(); err == nil {
				cfg.Test = strings.ToUpper(v)
			}
		case !testOpts && key == "-l":
			if v, err = value(); err == nil {
				cfg.Duration, err = parseLength(v)
			}
		case !testOpts && key == "-P":
			if v, err = value(); err == nil {
				banner = v != "0"
			}
		case !testOpts && key == "-v":
			_, err = value()
		case testOpts && (key == "-o" || key == "-O"):
			if v, err = value(); err == nil {
				sel, err = parseSelectors(v)
			}
		case testOpts && key == "-m":
			if v, err = value(); err == nil {
				cfg.MsgSize, err = parseSize(v)
				msgSet = true
			}
		case testOpts && key == "-r":
			if v, err = value(); err == nil {
				req, rsp, hasRsp := strings.Cut(v, ",")
				if cfg.ReqSize, err = parseSize(req); err == nil && hasRsp {
					cfg.RspSize, err = parseSize(rsp)
				} else if err == nil {
					cfg.RspSize = cfg.ReqSize
				}
			}
		case testOpts && ignored[key]:
			if key != "-D" {
				_, err = value()
			}
		default:
			err = fmt.Errorf("option %s is not one the lab's netperf takes", opt)
		}
		if err != nil {
			return cfg, nil, false, err
		}
	}
	if !msgSet {
		cfg.MsgSize = 16384
		if isUDP(cfg.Test) {
			cfg.MsgSize = 1472
		}
	}
	return cfg, sel, banner, nil
}

// parseLength reads -l: seconds, or a duration with a unit (cilium-cli passes
// Go's "10s").
func parseLength(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 {
			return 0, fmt.Errorf("-l %s: only a positive test length in seconds is supported", v)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("-l %s: not a test length", v)
	}
	return d, nil
}

// parseSize reads a byte count, with netperf's k/m suffixes (1024-based).
func parseSize(v string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(v, "k") || strings.HasSuffix(v, "K"):
		mult, v = 1024, v[:len(v)-1]
	case strings.HasSuffix(v, "m") || strings.HasSuffix(v, "M"):
		mult, v = 1024*1024, v[:len(v)-1]
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q is not a positive byte count", v)
	}
	return n * mult, nil
}

// NetperfMain runs netperf's command line and prints the result lines.
func NetperfMain(args []string, stdout, stderr io.Writer) int {
	cfg, sel, banner, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "netperf: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "netperf: %v\n", err)
		return 1
	}
	if banner {
		fmt.Fprintf(stdout, "MIGRATED %s TEST to %s port %d : %s of the lab's netperf\n", cfg.Test, cfg.Host, cfg.Port, cfg.Duration)
	}
	io.WriteString(stdout, format(sel, res))
	return 0
}

// NetserverMain runs netserver [-D] [-p PORT] [-L ADDR] [-4|-6]. Without -D it
// starts itself again detached, with -D, and returns, as netserver daemonizes.
func NetserverMain(args []string, stdout, stderr io.Writer) int {
	port, host, network, foreground := DefaultPort, "", "tcp", false
	for i := 0; i < len(args); i++ {
		var err error
		switch args[i] {
		case "-D", "-f":
			foreground = true
		case "-4":
			network = "tcp4"
		case "-6":
			network = "tcp6"
		case "-d":
		case "-p", "-L", "-v":
			if i+1 >= len(args) {
				err = fmt.Errorf("option %s needs a value", args[i])
				break
			}
			i++
			switch args[i-1] {
			case "-p":
				if port, err = strconv.Atoi(args[i]); err != nil || port < 1 || port > 65535 {
					err = fmt.Errorf("-p %s: not a port", args[i])
				}
			case "-L":
				host, _, _ = strings.Cut(args[i], ",")
			}
		default:
			err = fmt.Errorf("option %s is not one the lab's netserver takes", args[i])
		}
		if err != nil {
			fmt.Fprintf(stderr, "netserver: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "Starting netserver with host '%s' port '%d' and family %s\n", orDefault(host, "IN(6)ADDR_ANY"), port, network)
	if !foreground {
		self, err := os.Executable()
		if err == nil {
			cmd := exec.Command(self, append([]string{"-D"}, args...)...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			err = cmd.Start()
		}
		if err != nil {
			fmt.Fprintf(stderr, "netserver: daemonize: %v\n", err)
			return 1
		}
		return 0
	}
	ln, err := net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		fmt.Fprintf(stderr, "netserver: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Serve(ctx, ln, stderr); err != nil {
		fmt.Fprintf(stderr, "netserver: %v\n", err)
		return 1
	}
	return 0
}

func orDefault(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
