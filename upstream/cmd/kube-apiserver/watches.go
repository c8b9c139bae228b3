package main

// The lab's truth of each watch this server serves: when it began, on which
// connection (the peer as the server sees it: what the lab joins to the
// client's own record of the connection), over which protocol, and how it
// ended. Upstream logs none of this; the outermost filter sees each request
// arrive and its handler return.

import (
	"net/http"
	"sync/atomic"
)

// watchLog numbers the watches it sees.
type watchLog struct {
	events *eventLog
	next   atomic.Int64
}

func isWatch(r *http.Request) bool {
	v := r.URL.Query().Get("watch")
	return r.Method == http.MethodGet && (v == "true" || v == "1")
}

// withWatchLog prints watch_started as a watch request arrives and
// watch_ended as its handler returns, with how: "client-gone" when the
// request's context ended first (the client closed the connection or reset the
// stream), "ended" when the server returned by itself (its timeout, a drain, an
// error event). A watch the process's exit cut has no watch_ended.
func (l *watchLog) withWatchLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isWatch(r) {
			next.ServeHTTP(w, r)
			return
		}
		id := l.next.Add(1)
		protocol := "h1"
		if r.ProtoMajor == 2 {
			protocol = "h2"
		}
		l.events.Emit("watch_started", fields{
			"stream": id, "peer": r.RemoteAddr, "protocol": protocol,
			"path": r.URL.RequestURI(), "user_agent": r.UserAgent(),
		})
		// The writer goes on untouched: upstream's filters find the connection's Flusher
		// through their own wrappers only, and a watch on any other writer fails with 500.
		next.ServeHTTP(w, r)
		// Before this filter returns, the request's context has ended only if the client
		// went away: Go ends it at the handler's return, which is still to come.
		how := "ended"
		if r.Context().Err() != nil {
			how = "client-gone"
		}
		l.events.Emit("watch_ended", fields{"stream": id, "how": how})
	})
}
