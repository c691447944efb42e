package pprof

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/hivetest"
	"github.com/spf13/pflag"
)

// TestServesOnlyWhenAsked: off by default; with --pprof the agent's
// profiles answer on the address and port given.
func TestServesOnlyWhenAsked(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/debug/pprof/goroutine?debug=1"
	for _, on := range []bool{false, true} {
		h := hive.New(Cell)
		flags := pflag.NewFlagSet("agent", pflag.ContinueOnError)
		h.RegisterFlags(flags)
		if err := flags.Parse([]string{"--pprof=" + strconv.FormatBool(on), "--pprof-address=127.0.0.1", "--pprof-port=" + strconv.Itoa(port)}); err != nil {
			t.Fatal(err)
		}
		log := hivetest.Logger(t)
		if err := h.Start(log, context.Background()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(url)
		if !on {
			if err == nil {
				resp.Body.Close()
				t.Error("profiles served without --pprof")
			}
		} else if err != nil {
			t.Errorf("with --pprof: %v", err)
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile:") {
				t.Errorf("with --pprof: %d %.200s", resp.StatusCode, body)
			}
		}
		if err := h.Stop(log, context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
