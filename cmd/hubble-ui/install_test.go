package main

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	install "github.com/cilium-go/cilium/install/kubernetes"
)

// TestDeploymentFlags runs the arguments of install/kubernetes's
// hubble-ui container through the command's own flags.
func TestDeploymentFlags(t *testing.T) {
	dep, err := install.Object[*appsv1.Deployment]("hubble-ui")
	if err != nil {
		t.Fatal(err)
	}
	spec := &dep.Spec.Template.Spec
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "hubble-ui" })
	if i < 0 {
		t.Fatal("no hubble-ui container")
	}
	args, err := install.Args(&spec.Containers[i], nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &config{}
	fs := newCommand(c).Flags()
	if err := fs.Parse(args); err != nil {
		t.Fatalf("hubble-ui flags: %v", err)
	}
	if fs.NArg() != 0 {
		t.Errorf("arguments left over: %q", fs.Args())
	}
	if !c.tlsToRelay || len(c.relayCAFiles) != 1 || c.clientCert == "" || c.agentSocket == "" {
		t.Errorf("the Deployment's UI: %+v, want TLS to the relay with a client certificate and the agent's socket", c)
	}
}
