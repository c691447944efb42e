package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A filler is a selectorless Service with an EndpointSlice the bench
// manages: 2 to 4 endpoints at the bench's pods on a port nothing listens
// on, or, for the last filler of each scale (live), the backends' echo.
type filler struct {
	name  string
	cip   netip.Addr
	live  bool
	slice *discoveryv1.EndpointSlice // as the API server last returned it
}

// fillerObjects are filler i's Service and EndpointSlice.
func (l *labBed) fillerObjects(i int, live bool) (*corev1.Service, *discoveryv1.EndpointSlice) {
	name := fmt.Sprintf("filler-%05d", i)
	port := int32(20000 + i%20000)
	pool := append([]netip.Addr{l.client}, l.backends...) // 4 addresses, one endpoint each at most
	n := 2 + i%3
	if live {
		port, pool, n = echoPort, l.backends, len(l.backends)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: fillerPort, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: managedBy}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: &port, Protocol: new(corev1.ProtocolTCP)}},
	}
	for j := range n {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{pool[(i+j)%len(pool)].String()},
			Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
		})
	}
	return svc, slice
}

// scaleTo makes the cluster hold n Services: fillers up to one short of
// n, then a live filler, which the client reaches once the proxy has
// programmed it (and, as proxies apply changes in the order they see
// them, everything before it).
func (l *labBed) scaleTo(ctx context.Context, log *slog.Logger, n int) error {
	need := n - l.services
	if need < 1 {
		return fmt.Errorf("-lab-scales %d: the cluster already holds %d Services", n, l.services)
	}
	t0 := time.Now()
	first := len(l.fillers)
	if err := l.createFillers(ctx, first, need-1, false); err != nil {
		return err
	}
	if err := l.createFillers(ctx, first+need-1, 1, true); err != nil {
		return err
	}
	created := time.Since(t0)
	sentinel := l.fillers[len(l.fillers)-1]
	if err := l.waitReachable(ctx, sentinel.cip, 10*time.Minute); err != nil {
		return err
	}
	log.Info("Services in the lab", "proxy", l.mode.name, "n", n, "created-in", created.Round(time.Millisecond),
		"programmed-after", time.Since(t0).Round(time.Millisecond))
	return nil
}

// creators create fillers at once: a create waits mostly for the API
// server.
const creators = 32

// createFillers creates fillers first..first+count-1.
func (l *labBed) createFillers(ctx context.Context, first, count int, live bool) error {
	out := make([]*filler, count)
	work := make(chan int)
	errs := make(chan error, creators)
	var wg sync.WaitGroup
	for range creators {
		wg.Go(func() {
			for i := range work {
				f, err := l.createFiller(ctx, first+i, live)
				if err != nil {
					errs <- err
					return
				}
				out[i] = f
			}
		})
	}
	var err error
feed:
	for i := range count {
		select {
		case work <- i:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if err != nil {
		return err
	}
	l.fillers = append(l.fillers, out...)
	l.services += count
	return nil
}

func (l *labBed) createFiller(ctx context.Context, i int, live bool) (*filler, error) {
	svc, slice := l.fillerObjects(i, live)
	s, err := l.Clientset.CoreV1().Services(benchNS).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: create Service %s: %w", l.mode.name, svc.Name, err)
	}
	cip, err := netip.ParseAddr(s.Spec.ClusterIP)
	if err != nil {
		return nil, fmt.Errorf("%s: Service %s has ClusterIP %q", l.mode.name, svc.Name, s.Spec.ClusterIP)
	}
	es, err := l.Clientset.DiscoveryV1().EndpointSlices(benchNS).Create(ctx, slice, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: create EndpointSlice %s: %w", l.mode.name, slice.Name, err)
	}
	return &filler{name: svc.Name, cip: cip, live: live, slice: es}, nil
}
