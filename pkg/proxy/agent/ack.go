package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/cilium/statedb"

	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
	"github.com/cilium-go/cilium/pkg/proxy"
	"github.com/cilium-go/cilium/pkg/unixsock"
)

// serveAcks takes the proxy's acknowledgements (proxy.Ack) on the unix
// socket at path until ctx ends: POST /v1/policy-ack. One of this run's
// policies goes into acks; one of an earlier run's, whose revisions
// say nothing of this run's, is answered and dropped.
func serveAcks(ctx context.Context, path string, run uint64, db *statedb.DB, acks statedb.RWTable[*policyagent.ProxyAckRow], log *slog.Logger) error {
	ln, err := unixsock.Listen(path)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/policy-ack", func(w http.ResponseWriter, r *http.Request) {
		var a proxy.Ack
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&a); err != nil {
			http.Error(w, "ack: "+err.Error(), http.StatusBadRequest)
			return
		}
		if a.Run == run {
			writeAck(db, acks, a.Revision)
		} else {
			log.Debug("layer-7 proxy acknowledged an earlier agent run's policy", "run", a.Run, "revision", a.Revision)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return unixsock.ServeHTTP(ctx, ln, mux)
}

// writeAck replaces the acknowledgement, even by one of the same
// revision (a restarted proxy's): each tells that the proxy is there.
// It never goes back, whatever order two proxies' acknowledgements
// come in.
func writeAck(db *statedb.DB, acks statedb.RWTable[*policyagent.ProxyAckRow], rev uint64) {
	txn := db.WriteTxn(acks)
	if old, _, ok := acks.Get(txn, policyagent.ProxyAckIndex.Query(struct{}{})); ok {
		rev = max(rev, old.Revision)
	}
	_, _, _ = acks.Insert(txn, &policyagent.ProxyAckRow{Revision: rev})
	txn.Commit()
}
