package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHeaderValueMatchesOpenShiftVectors(t *testing.T) {
	cases := []struct {
		shutdown       bool
		delay, elapsed time.Duration
		want           string
	}{
		{false, 10 * time.Second, 0, "shutdown=false shutdown-delay-duration=10s elapsed=0s host=foo"},
		{true, 10 * time.Second, 20 * time.Second, "shutdown=true shutdown-delay-duration=10s elapsed=20s host=foo"},
		{true, 0, 20 * time.Second, "shutdown=true shutdown-delay-duration=0s elapsed=20s host=foo"},
		{true, 70 * time.Second, 70*time.Second + 400*time.Millisecond, "shutdown=true shutdown-delay-duration=1m10s elapsed=1m10s host=foo"},
		{true, 129 * time.Second, 1500 * time.Millisecond, "shutdown=true shutdown-delay-duration=2m9s elapsed=2s host=foo"},
	}
	for _, c := range cases {
		if got := headerValue(c.shutdown, c.delay, c.elapsed, "foo"); got != c.want {
			t.Errorf("headerValue = %q, want %q", got, c.want)
		}
	}
}

func TestDisruptionHeaderOptInAndShutdown(t *testing.T) {
	var buf bytes.Buffer
	shutdown := make(chan struct{})
	d := newDisruption(10*time.Second, "apiserver-test", shutdown, newEventLog(&buf))
	h := d.withDisruptionHeader(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
	}))

	get := func(optIn bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default", nil)
		if optIn {
			req.Header.Set("X-Openshift-If-Disruption", "true")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	if v := get(false).Header().Get("X-Openshift-Disruption"); v != "" {
		t.Fatalf("header without opt-in: %q", v)
	}
	if v := get(true).Header().Get("X-Openshift-Disruption"); v != "shutdown=false shutdown-delay-duration=10s elapsed=0s host=apiserver-test" {
		t.Fatalf("before shutdown: %q", v)
	}
	close(shutdown)
	rec := get(true)
	if v := rec.Header().Get("X-Openshift-Disruption"); !strings.HasPrefix(v, "shutdown=true shutdown-delay-duration=10s elapsed=0s host=apiserver-test") {
		t.Fatalf("after shutdown: %q", v)
	}
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("status %d", rec.Code)
	}
}
