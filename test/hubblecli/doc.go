// Package hubblecli pins the upstream hubble CLI (Cilium's, at the version
// in go.mod) that the e2e tests run against cilium-go: make
// build-hubble-upstream installs it into bin/upstream/hubble.
package hubblecli
