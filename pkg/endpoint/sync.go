package endpoint

import "github.com/cilium/statedb"

// Local is every local endpoint in eps, as of txn: what the controllers
// that follow the endpoints (desired.Controller) compute from.
func Local(txn statedb.ReadTxn, eps statedb.Table[*EndpointRow]) []Endpoint {
	var out []Endpoint
	for d := range Live(txn, eps) {
		out = append(out, d.Endpoint)
	}
	return out
}
