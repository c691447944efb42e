package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/proxy"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
	"github.com/cilium-go/cilium/pkg/unixsock"
)

// agentSide is the agent's end of what the proxy talks to, in the
// agent's directory for the proxy: the policy file it writes, the socket
// the proxy tells of allowed DNS answers (pkg/fqdn/agent's), and the
// access log's socket, whose records it counts (Hubble's share of
// handling them is left out).
//
// The name manager here does the agent's work for an answer whose
// addresses it knows, the steady state of a name looked up again and
// again: the lookup into a pkg/fqdn Cache of the agent's defaults. New
// addresses would take more (saving the cache, the policy engine,
// waiting for the datapath's entries), which no lookup of the bench
// makes after its first. Its cache holds the bench's name only, or,
// with full, the memory part's 10,000 learned IPs besides: a node whose
// endpoints learned that many.
type agentSide struct {
	dir       string
	srv       *http.Server
	records   *accesslog.Listener
	served    chan error
	full      atomic.Bool // Learn into fullCache
	mu        sync.Mutex
	cache     *fqdn.Cache  // the bench's name only
	fullCache *fqdn.Cache  // and fullCacheIPs others
	told      atomic.Int64 // lookups the proxy told of
	received  atomic.Int64 // request records the access log brought
}

// agentCache is pkg/fqdn/agent's DefaultConfig as a cache's config.
var agentCache = fqdn.CacheConfig{MaxIPsPerName: 1000, MaxZombies: 10000}

// fullCacheIPs are the IPs of the full cache besides the bench's name's.
const fullCacheIPs = memEndpoints * selectorsPerEp * ipsPerName

// learnWay is what the proxy's Learn does in a DNS run, and the TTL of
// the answers.
type learnWay int

const (
	learnNone     learnWay = iota // nothing
	learnOnce                     // tells the agent; the TTL lets the proxy tell it once
	learnEach                     // tells the agent of each answer: TTL 0
	learnEachFull                 // the same, the agent's cache holding fullCacheIPs besides
	learnWays     = 4
)

func (w learnWay) String() string {
	switch w {
	case learnOnce:
		return fmt.Sprintf("Learn to agent, TTL %ds", benchTTL)
	case learnEach:
		return "Learn to agent, TTL 0"
	case learnEachFull:
		return fmt.Sprintf("Learn to agent, TTL 0, %d IPs cached", fullCacheIPs)
	}
	return "Learn no-op"
}

// request is what the proxy process is asked to make its Learn do w.
func (w learnWay) request() string {
	if w == learnNone {
		return askLearnNone
	}
	return askLearnAgent
}

// ttl is the TTL of the answers of w's runs.
func (w learnWay) ttl() uint32 {
	if w == learnEach || w == learnEachFull {
		return 0
	}
	return benchTTL
}

// told is how many of a run's n lookups of one name the proxy tells the
// agent of: with a TTL, the first only (it tells again after half of
// it, longer than a run).
func (w learnWay) told(n int) int64 {
	switch {
	case w == learnNone || n == 0:
		return 0
	case w == learnOnce:
		return 1
	}
	return int64(n)
}

func newAgentSide(pol proxy.Policy) (a *agentSide, err error) {
	dir, err := os.MkdirTemp("", "bench-l7-")
	if err != nil {
		return nil, err
	}
	a = &agentSide{dir: dir, cache: fqdn.NewCache(agentCache), served: make(chan error, 1),
		fullCache: buildCache(lookups(fqdnSelectors(memEndpoints, selectorsPerEp), time.Now()))}
	defer func() {
		if err != nil {
			err = errors.Join(err, a.Close())
		}
	}()
	b, err := json.Marshal(pol)
	if err != nil {
		return a, err
	}
	if err := os.WriteFile(proxy.PolicyFile(dir), b, 0o600); err != nil {
		return a, err
	}
	ln, err := unixsock.Listen(proxy.LearnSocket(dir))
	if err != nil {
		return a, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/learn", func(w http.ResponseWriter, r *http.Request) {
		var l fqdn.Lookup
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&l); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c := a.cache
		if a.full.Load() {
			c = a.fullCache
		}
		a.mu.Lock()
		c.Learn(l)
		a.mu.Unlock()
		a.told.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: dptest.ReplyWait}
	go a.srv.Serve(ln)
	if a.records, err = accesslog.Listen(accesslog.SocketFile(dir), slog.New(slog.DiscardHandler)); err != nil {
		return a, err
	}
	go func() {
		a.served <- a.records.Serve(context.Background(), func(r accesslog.Record) {
			if r.Type == accesslog.Request {
				a.received.Add(1)
			}
		})
	}()
	return a, nil
}

func (a *agentSide) Close() error {
	var errs []error
	if a.srv != nil {
		errs = append(errs, a.srv.Close())
	}
	if a.records != nil {
		a.records.Close()
		errs = append(errs, <-a.served)
	}
	return errors.Join(append(errs, os.RemoveAll(a.dir))...)
}
