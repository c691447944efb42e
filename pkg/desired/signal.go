package desired

import (
	"sync"

	"github.com/cilium/statedb"
)

// Signal is an input that is no table: a wake from within the process
// (the datapath's maps opened, the kernel caught up with a table), for
// what run keeps beside its input tables. Fires that come before run
// next reads merge into one run.
type Signal struct {
	mu sync.Mutex
	// fired closes at the next Fire.
	fired chan struct{}
}

// NewSignal returns a Signal not fired yet.
func NewSignal() *Signal { return &Signal{fired: make(chan struct{})} }

// Fire wakes the controller that has s as an input; it never blocks.
func (s *Signal) Fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.fired)
	s.fired = make(chan struct{})
}

// Input is s as a controller's input, whole from the start: a fire
// before the controller first runs wakes nothing more than that run.
func (s *Signal) Input() Input {
	return Input{Watch: func(statedb.ReadTxn) <-chan struct{} {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.fired
	}}
}
