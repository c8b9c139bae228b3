package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unsafe"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/rest"
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"

	"prober.lab/upstream/internal/jsonline"
)

// fields are the extra keys of one JSON line; eventLog writes the lines (`jsonline`).
type (
	fields   = jsonline.Fields
	eventLog = jsonline.Log
)

var newEventLog = jsonline.New

// lifecycle signals of upstream's GenericAPIServer, by field name of its
// unexported lifecycleSignals struct (k8s.io/apiserver v0.37.2
// pkg/server/lifecycle_signals.go), and the event name we print for each.
var reflectedSignals = []struct{ field, event string }{
	{"MuxAndDiscoveryComplete", "mux_and_discovery_complete"},
	{"HasBeenReady", "has_been_ready"},
	{"AfterShutdownDelayDuration", "after_shutdown_delay"},
	{"PreShutdownHooksStopped", "pre_shutdown_hooks_stopped"},
	{"NotAcceptingNewRequest", "not_accepting_new_requests"},
	{"HTTPServerStoppedListening", "http_server_stopped_listening"},
}

type namedSignal interface {
	Signaled() <-chan struct{}
	Name() string
}

// watchLifecycle prints a line when each lifecycle signal fires.
// ShutdownInitiated (printed by the disruption filter) and InFlightRequestsDrained
// are exported through Config.ShutdownInitiatedNotify / Config.DrainedNotify.
// The other signals are not exported in v1.37.2; they are read (never written)
// from the server's unexported lifecycleSignals field by reflection. If that
// field is missing (another version), a "lifecycle_reflection_unavailable" line
// says so and only the exported signals are printed.
func watchLifecycle(s *genericapiserver.GenericAPIServer, c *genericapiserver.Config, events *eventLog) {
	watch := func(ch <-chan struct{}, event, source string) {
		go func() {
			<-ch // these goroutines live as long as the process
			events.Emit(event, fields{"source": source})
		}()
	}
	watch(c.DrainedNotify(), "in_flight_drained", "Config.DrainedNotify")

	if os.Getenv("PROBER_LIFECYCLE_REFLECT") == "0" {
		return
	}
	signals, err := reflectSignals(s)
	if err != nil {
		events.Emit("lifecycle_reflection_unavailable", fields{"error": err.Error()})
		return
	}
	for _, rs := range reflectedSignals {
		sig := signals[rs.field]
		watch(sig.Signaled(), rs.event, "GenericAPIServer.lifecycleSignals."+sig.Name())
	}
}

func reflectSignals(s *genericapiserver.GenericAPIServer) (map[string]namedSignal, error) {
	if s == nil {
		return nil, fmt.Errorf("no GenericAPIServer")
	}
	v := reflect.ValueOf(s).Elem().FieldByName("lifecycleSignals")
	if !v.IsValid() || v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("GenericAPIServer has no lifecycleSignals struct field")
	}
	out := map[string]namedSignal{}
	for _, rs := range reflectedSignals {
		f := v.FieldByName(rs.field)
		if !f.IsValid() || !f.CanAddr() {
			return nil, fmt.Errorf("lifecycleSignals has no field %s", rs.field)
		}
		iface := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface()
		sig, ok := iface.(namedSignal)
		if !ok || sig == nil {
			return nil, fmt.Errorf("lifecycleSignals.%s is not a signal", rs.field)
		}
		out[rs.field] = sig
	}
	return out, nil
}

// startReadyPoller polls the server's own /readyz over its loopback client
// until the first 200: "listening" is printed at the first HTTP answer of any
// status, "ready" at the first 200, then "identity_lease" once the identity
// Lease holds this process's holder (reportIdentity). Interval: env PROBER_READY_POLL (Go
// duration, default 100ms; "0" turns the poller off). These requests are made
// as the loopback user system:apiserver and are audited like any other.
func startReadyPoller(ctx context.Context, loopback *rest.Config, id string, events *eventLog) {
	interval := 100 * time.Millisecond
	if v := os.Getenv("PROBER_READY_POLL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return
		}
		interval = d
	}
	if loopback == nil {
		return
	}
	cfg := rest.CopyConfig(loopback)
	cfg.Timeout = 2 * time.Second
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		events.Emit("ready_poller_unavailable", fields{"error": err.Error()})
		return
	}
	go func() {
		listening := false
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/readyz", nil)
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if !listening {
					listening = true
					events.Emit("listening", fields{"source": "loopback /readyz poll", "status": resp.StatusCode})
				}
				if resp.StatusCode == http.StatusOK {
					events.Emit("ready", fields{"source": "loopback /readyz poll", "status": resp.StatusCode})
					reportIdentity(ctx, client, cfg.Host, id, interval, events)
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
}

// reportIdentity prints "identity_lease" with the identity Lease's name and its
// holder once the Lease exists: the holder is this process's own (upstream makes
// it the APIServerID and a new UUID per start, inside a post-start hook), what
// tells one instance of a host from the next.
func reportIdentity(ctx context.Context, client *http.Client, host, id string, interval time.Duration, events *eventLog) {
	url := host + "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/" + id
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			var lease struct {
				Spec struct {
					HolderIdentity string `json:"holderIdentity"`
				} `json:"spec"`
			}
			decoded := json.NewDecoder(resp.Body).Decode(&lease)
			_ = resp.Body.Close()
			holder := lease.Spec.HolderIdentity
			if resp.StatusCode == http.StatusOK && decoded == nil && strings.HasPrefix(holder, id+"_") {
				events.Emit("identity_lease", fields{"name": id, "holder": holder})
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// applyIdentityLeaseEnv sets upstream's identity-Lease package variables
// (k8s.io/kubernetes/pkg/controlplane/apiserver) from the environment, before
// the server is built:
//
//	PROBER_IDENTITY_LEASE_DURATION  IdentityLeaseDurationSeconds     (Go duration or whole seconds; upstream 3600)
//	PROBER_IDENTITY_LEASE_RENEW     IdentityLeaseRenewIntervalPeriod (Go duration; upstream 10s)
//	PROBER_IDENTITY_LEASE_GC        IdentityLeaseGCPeriod            (Go duration; upstream 1h)
//
// It returns the effective values for the "start" line.
func applyIdentityLeaseEnv() (fields, error) {
	parse := func(name string) (time.Duration, bool, error) {
		v := os.Getenv(name)
		if v == "" {
			return 0, false, nil
		}
		if n, err := strconv.Atoi(v); err == nil {
			return time.Duration(n) * time.Second, true, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, false, fmt.Errorf("%s=%q: want a positive Go duration (e.g. 10s) or whole seconds", name, v)
		}
		return d, true, nil
	}
	if d, ok, err := parse("PROBER_IDENTITY_LEASE_DURATION"); err != nil {
		return nil, err
	} else if ok {
		secs := int(d.Round(time.Second) / time.Second)
		if secs < 1 {
			return nil, fmt.Errorf("PROBER_IDENTITY_LEASE_DURATION must be at least 1s (the Lease holds whole seconds)")
		}
		controlplaneapiserver.IdentityLeaseDurationSeconds = secs
	}
	if d, ok, err := parse("PROBER_IDENTITY_LEASE_RENEW"); err != nil {
		return nil, err
	} else if ok {
		controlplaneapiserver.IdentityLeaseRenewIntervalPeriod = d
	}
	if d, ok, err := parse("PROBER_IDENTITY_LEASE_GC"); err != nil {
		return nil, err
	} else if ok {
		controlplaneapiserver.IdentityLeaseGCPeriod = d
	}
	return fields{
		"duration_s": controlplaneapiserver.IdentityLeaseDurationSeconds,
		"renew_s":    controlplaneapiserver.IdentityLeaseRenewIntervalPeriod.Seconds(),
		"gc_s":       controlplaneapiserver.IdentityLeaseGCPeriod.Seconds(),
	}, nil
}
