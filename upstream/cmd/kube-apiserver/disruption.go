package main

// The OpenShift carry behaviour, written for this lab against upstream's
// exported API (no OpenShift or upstream source is copied):
//
//   - X-OpenShift-Disruption response header, opt-in by the request header
//     X-Openshift-If-Disruption (openshift/kubernetes
//     staging/src/k8s.io/apiserver/pkg/server/filters/with_early_late_annotations.go);
//   - audit annotation openshift.io/during-graceful for requests on connections
//     accepted after 80% of the shutdown delay (OpenShift's
//     patch_genericapiserver.go: a listener marks late connections by remote
//     address, a filter annotates their requests);
//   - audit annotation apiserver.k8s.io/shutdown (OpenShift's older form) on
//     every authenticated request received after ShutdownInitiated.

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"
)

const (
	// requestOptInHeader: any non-empty value asks for the response header.
	requestOptInHeader = "X-Openshift-If-Disruption"
	// responseHeader is the header OpenShift's filter sets (Go canonicalises it
	// to X-Openshift-Disruption on the wire).
	responseHeader = "X-OpenShift-Disruption"

	// annotationDuringGraceful is OpenShift's current late-connection annotation.
	annotationDuringGraceful = "openshift.io/during-graceful"
	// annotationShutdown is OpenShift's older per-request annotation.
	annotationShutdown = "apiserver.k8s.io/shutdown"

	// lateFraction of the shutdown delay after which new connections are late.
	lateFraction = 0.8
)

// disruption holds the state shared by the header filter, the audit
// annotations and the late-connection listener.
type disruption struct {
	delay             time.Duration
	apiServerID       string
	shutdownInitiated <-chan struct{}
	events            *eventLog
	watches           *watchLog

	// shutdownAt is when ShutdownInitiated was first observed (nil before).
	shutdownAt atomic.Pointer[time.Time]
	// lateCh closes lateFraction*delay after ShutdownInitiated.
	lateCh chan struct{}

	lateMu    sync.RWMutex
	lateAddrs map[string]time.Time // remote address -> accept time, late connections only
	lateOnce  atomic.Bool          // one warning line for non-loopback late requests
}

func newDisruption(delay time.Duration, apiServerID string, shutdownInitiated <-chan struct{}, events *eventLog) *disruption {
	d := &disruption{
		delay:             delay,
		apiServerID:       apiServerID,
		shutdownInitiated: shutdownInitiated,
		events:            events,
		watches:           &watchLog{events: events},
		lateCh:            make(chan struct{}),
		lateAddrs:         map[string]time.Time{},
	}
	go func() {
		<-shutdownInitiated
		at := d.markShutdown()
		events.EmitAt("shutdown_initiated", at, fields{"source": "Config.ShutdownInitiatedNotify"})
		lateAfter := time.Duration(float64(delay) * lateFraction)
		time.Sleep(time.Until(at.Add(lateAfter)))
		close(d.lateCh)
		events.Emit("late_connections_begin", fields{"after_s": lateAfter.Seconds(), "fraction": lateFraction})
	}()
	return d
}

// markShutdown records the shutdown instant once and returns it.
func (d *disruption) markShutdown() time.Time {
	now := time.Now()
	d.shutdownAt.CompareAndSwap(nil, &now)
	return *d.shutdownAt.Load()
}

// shutdownState tells whether shutdown has been initiated and how long ago.
func (d *disruption) shutdownState() (bool, time.Duration) {
	select {
	case <-d.shutdownInitiated:
	default:
		return false, 0
	}
	return true, time.Since(d.markShutdown())
}

// headerValue renders the X-OpenShift-Disruption value.
func headerValue(shutdown bool, delay, elapsed time.Duration, host string) string {
	return fmt.Sprintf("shutdown=%t shutdown-delay-duration=%s elapsed=%s host=%s",
		shutdown, delay.Round(time.Second).String(), elapsed.Round(time.Second).String(), host)
}

// wrapChain builds upstream's chain around apiHandler and places our filters:
//
//	withWatchLog                      outermost: each watch's start and end (watches.go)
//	 withDisruptionHeader             every response (401, 429, 500 too)
//	  withLateConnectionAnnotation    before upstream's WithAuditInit (shares its audit context)
//	   upstream chain (WithAuditInit ... WithAuthentication ... WithAudit ... WithAuthorization)
//	    withShutdownAnnotation        after authentication (needs the user), inside audit
//	     apiHandler (the director)
func (d *disruption) wrapChain(apiHandler http.Handler, c *genericapiserver.Config, upstream func(http.Handler, *genericapiserver.Config) http.Handler) http.Handler {
	h := upstream(d.withShutdownAnnotation(apiHandler), c)
	h = d.withLateConnectionAnnotation(h)
	return d.watches.withWatchLog(d.withDisruptionHeader(h))
}

func (d *disruption) withDisruptionHeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(requestOptInHeader) != "" {
			shutdown, elapsed := d.shutdownState()
			w.Header().Set(responseHeader, headerValue(shutdown, d.delay, elapsed, d.apiServerID))
		}
		next.ServeHTTP(w, r)
	})
}

// wrapListener marks connections accepted after the late threshold. It returns
// the accepted connection itself (upstream's keep-alive listener type-asserts
// *net.TCPConn), keyed by its remote address as OpenShift does.
func (d *disruption) wrapListener(l net.Listener) net.Listener {
	return &lateListener{Listener: l, d: d}
}

type lateListener struct {
	net.Listener
	d *disruption
}

func (l *lateListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	select {
	case <-l.d.lateCh:
		l.d.lateMu.Lock()
		l.d.lateAddrs[c.RemoteAddr().String()] = time.Now()
		l.d.lateMu.Unlock()
	default:
	}
	return c, nil
}

func isHealthProbe(r *http.Request) bool {
	switch "/" + strings.TrimLeft(r.URL.Path, "/") {
	case "/readyz", "/healthz", "/livez":
		return true
	}
	return false
}

func isLoopbackAddr(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := netutils.ParseIPSloppy(host)
	return ip != nil && ip.IsLoopback()
}

// withLateConnectionAnnotation annotates non-probe requests arriving on late
// connections. It runs before upstream's WithAuditInit, so it creates the
// request's audit context itself (audit.WithAuditContext does not register a
// second one, and annotations added before the policy is evaluated are kept).
func (d *disruption) withLateConnectionAnnotation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.lateMu.RLock()
		_, late := d.lateAddrs[r.RemoteAddr]
		d.lateMu.RUnlock()
		if late && !isHealthProbe(r) {
			r = r.WithContext(audit.WithAuditContext(r.Context()))
			loopback := isLoopbackAddr(r.RemoteAddr)
			audit.AddAuditAnnotation(r.Context(), annotationDuringGraceful,
				fmt.Sprintf("loopback=%t,%s,readyz=false", loopback, r.URL.Host))
			if loopback {
				klog.V(4).Infof("Loopback request to %q (user agent %q) on a connection accepted after %.0f%% of the shutdown delay", r.URL.Path, r.UserAgent(), lateFraction*100)
			} else {
				klog.Warningf("Request to %q (source IP %s, user agent %q) on a connection accepted after %.0f%% of the shutdown delay, possibly a sign of a broken load balancer setup", r.URL.Path, r.RemoteAddr, r.UserAgent(), lateFraction*100)
				if d.lateOnce.CompareAndSwap(false, true) {
					d.events.Emit("late_connection_request", fields{"remote": r.RemoteAddr, "path": r.URL.Path, "user_agent": r.UserAgent()})
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// withShutdownAnnotation writes apiserver.k8s.io/shutdown on requests received
// after ShutdownInitiated, skipping health probes and the server's own loopback
// user (as OpenShift's older filter did). threshold is elapsed as a percentage
// of the delay; late is threshold > 80%.
func (d *disruption) withShutdownAnnotation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		shutdown, elapsed := d.shutdownState()
		if !shutdown || isHealthProbe(r) {
			next.ServeHTTP(w, r)
			return
		}
		self := "self="
		if u, ok := request.UserFrom(r.Context()); ok && u != nil {
			if u.GetName() == user.APIServerUser {
				next.ServeHTTP(w, r)
				return
			}
			self += "false"
		}
		percent := 100
		if d.delay > 0 {
			percent = int(elapsed * 100 / d.delay)
		}
		audit.AddAuditAnnotation(r.Context(), annotationShutdown,
			fmt.Sprintf("elapsed=%s threshold=%d%% late=%t %s loopback=%t",
				elapsed.Round(time.Second).String(), percent, percent > int(lateFraction*100), self, isLoopbackAddr(r.RemoteAddr)))
		next.ServeHTTP(w, r)
	})
}
