// Command informer is a reference client-go (v0.37.2) informer on
// coordination.k8s.io/v1 Leases in one namespace. It wraps the informer's
// ListerWatcher and every watch.Interface it returns, sets the watch error
// handler, and prints one JSON line on stdout for every list call, watch start,
// watch end, watch event, watch error, informer notification and HTTP round
// trip, so that the prober can see what a real informer sees.
//
// client-go's own switches apply unchanged: KUBE_FEATURE_WatchListClient=false
// turns the streaming watch-list initial sync off (on by default in v0.37.2),
// DISABLE_HTTP2=1 forces HTTP/1.1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/klog/v2"

	"prober.lab/upstream/internal/jsonline"
)

// fields are the extra keys of one JSON line; out writes the lines (`jsonline`).
type (
	fields = jsonline.Fields
	out    = jsonline.Log
)

var wall = jsonline.Wall

func errString(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}

func optionsFields(o metav1.ListOptions) fields {
	f := fields{
		"resourceVersion":      o.ResourceVersion,
		"resourceVersionMatch": string(o.ResourceVersionMatch),
		"allowWatchBookmarks":  o.AllowWatchBookmarks,
		"sendInitialEvents":    nil,
		"timeoutSeconds":       nil,
		"limit":                o.Limit,
		"continue":             o.Continue,
		"fieldSelector":        o.FieldSelector,
		"labelSelector":        o.LabelSelector,
	}
	if o.SendInitialEvents != nil {
		f["sendInitialEvents"] = *o.SendInitialEvents
	}
	if o.TimeoutSeconds != nil {
		f["timeoutSeconds"] = *o.TimeoutSeconds
	}
	return f
}

// loggingListWatch wraps the informer's ListerWatcher.
type loggingListWatch struct {
	inner    cache.ListerWatcherWithContext
	tweak    func(*metav1.ListOptions) // the selectors, applied before logging (the inner ListWatch applies them too)
	client   any                       // for watchlist.DoesClientNotSupportWatchListSemantics
	o        *out
	lists    atomic.Int64 // list calls (pages count separately)
	fullList atomic.Int64 // list calls starting a new list (no continue token)
	watches  atomic.Int64
	initial  atomic.Int64 // watches with sendInitialEvents=true
	current  atomic.Int64 // id of the newest watch
}

func (l *loggingListWatch) List(options metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), options)
}

func (l *loggingListWatch) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), options)
}

// IsWatchListSemanticsUnSupported passes the wrapped client's answer through
// (false for a real clientset), so wrapping does not change the reflector's choice.
func (l *loggingListWatch) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.client)
}

func (l *loggingListWatch) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	if l.tweak != nil {
		l.tweak(&options)
	}
	id := l.lists.Add(1)
	relist := false
	if options.Continue == "" {
		relist = l.fullList.Add(1) > 1
	}
	start := time.Now()
	obj, err := l.inner.ListWithContext(ctx, options)
	end := time.Now()
	f := fields{
		"list_id":    id,
		"relist":     relist,
		"page":       options.Continue != "",
		"start":      wall(start),
		"end":        wall(end),
		"duration_s": end.Sub(start).Seconds(),
		"options":    optionsFields(options),
		"error":      errString(err),
		"count":      nil,
		"rv":         nil,
		"continue":   nil,
	}
	if err == nil && obj != nil {
		f["count"] = meta.LenList(obj)
		if lm, e := meta.ListAccessor(obj); e == nil {
			f["rv"] = lm.GetResourceVersion()
			f["continue"] = lm.GetContinue()
		}
	}
	l.o.EmitAt("list", end, f)
	return obj, err
}

func (l *loggingListWatch) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	if l.tweak != nil {
		l.tweak(&options)
	}
	id := l.watches.Add(1)
	initial := options.SendInitialEvents != nil && *options.SendInitialEvents
	relist := false
	if initial {
		relist = l.initial.Add(1) > 1 || l.fullList.Load() > 0
	}
	start := time.Now()
	w, err := l.inner.WatchWithContext(ctx, options)
	end := time.Now()
	l.o.EmitAt("watch_start", end, fields{
		"watch_id":     id,
		"initial_list": initial,
		"relist":       relist,
		"start":        wall(start),
		"duration_s":   end.Sub(start).Seconds(),
		"options":      optionsFields(options),
		"error":        errString(err),
	})
	if err != nil {
		return nil, err
	}
	l.current.Store(id)
	return newLoggingWatch(w, id, start, l.o), nil
}

// loggingWatch forwards a watch's events, printing each on arrival.
type loggingWatch struct {
	inner    watch.Interface
	id       int64
	o        *out
	ch       chan watch.Event
	stopped  chan struct{}
	stopOnce sync.Once
}

func newLoggingWatch(inner watch.Interface, id int64, start time.Time, o *out) *loggingWatch {
	w := &loggingWatch{inner: inner, id: id, o: o, ch: make(chan watch.Event), stopped: make(chan struct{})}
	go w.pump(start)
	return w
}

func (w *loggingWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.stopped)
		w.inner.Stop()
	})
}

func (w *loggingWatch) ResultChan() <-chan watch.Event { return w.ch }

func (w *loggingWatch) pump(start time.Time) {
	defer close(w.ch)
	var (
		count     int
		lastRV    string
		lastError any
	)
	end := func(cause string) {
		now := time.Now()
		w.o.EmitAt("watch_end", now, fields{
			"watch_id":     w.id,
			"cause":        cause,
			"events":       count,
			"last_rv":      lastRV,
			"error_status": lastError,
			"duration_s":   now.Sub(start).Seconds(),
		})
	}
	src := w.inner.ResultChan()
	for {
		select {
		case <-w.stopped:
			end("stopped_by_client")
			return
		case ev, ok := <-src:
			if !ok {
				select {
				case <-w.stopped:
					end("stopped_by_client")
				default:
					end("closed_by_server")
				}
				return
			}
			arrival := time.Now()
			count++
			f := eventFields(ev)
			f["watch_id"] = w.id
			if rv, _ := f["rv"].(string); rv != "" {
				lastRV = rv
			}
			if ev.Type == watch.Error {
				lastError = f["status"]
			}
			w.o.EmitAt("watch_event", arrival, f)
			select {
			case w.ch <- ev:
			case <-w.stopped:
				end("stopped_by_client")
				return
			}
		}
	}
}

func eventFields(ev watch.Event) fields {
	f := fields{"type": string(ev.Type), "name": "", "namespace": "", "rv": "", "renew_time": nil, "holder": nil}
	if ev.Type == watch.Error {
		if st, ok := ev.Object.(*metav1.Status); ok {
			f["status"] = fields{"code": st.Code, "reason": string(st.Reason), "message": st.Message}
		} else {
			f["status"] = fields{"message": fmt.Sprintf("%T", ev.Object)}
		}
		return f
	}
	if m, err := meta.Accessor(ev.Object); err == nil {
		f["name"] = m.GetName()
		f["namespace"] = m.GetNamespace()
		f["rv"] = m.GetResourceVersion()
		if ev.Type == watch.Bookmark {
			f["initial_events_end"] = m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
		}
	}
	if lease, ok := ev.Object.(*coordinationv1.Lease); ok {
		if lease.Spec.RenewTime != nil {
			f["renew_time"] = lease.Spec.RenewTime.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
		}
		if lease.Spec.HolderIdentity != nil {
			f["holder"] = *lease.Spec.HolderIdentity
		}
	}
	return f
}

// roundTripLogger prints one "http" line per request the client makes.
type roundTripLogger struct {
	next http.RoundTripper
	o    *out
}

func (r *roundTripLogger) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := r.next.RoundTrip(req)
	f := fields{
		"method":     req.Method,
		"url":        req.URL.String(),
		"start":      wall(start),
		"duration_s": time.Since(start).Seconds(),
		"error":      errString(err),
		"status":     nil,
		"proto":      nil,
	}
	if resp != nil {
		f["status"] = resp.StatusCode
		f["proto"] = resp.Proto
	}
	r.o.Emit("http", f)
	return resp, err
}

func main() {
	var (
		kubeconfig    = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default $KUBECONFIG)")
		namespace     = flag.String("namespace", "kube-system", "namespace of the Leases")
		fieldSelector = flag.String("field-selector", "", "field selector, e.g. metadata.name=X")
		labelSelector = flag.String("label-selector", "", "label selector, e.g. apiserver.kubernetes.io/identity=kube-apiserver")
		duration      = flag.Duration("duration", 0, "stop after this long (0: run until SIGTERM/SIGINT)")
		resync        = flag.Duration("resync", 0, "informer resync period (0: none)")
		httpLines     = flag.Bool("http-lines", true, "print one line per HTTP round trip")
		handlerLines  = flag.Bool("handler-lines", true, "print one line per informer notification (add/update/delete)")
		timeout       = flag.Duration("request-timeout", 0, "client-side timeout for non-watch requests (0: none)")
	)
	klog.InitFlags(nil)
	flag.Parse()

	o := jsonline.New(os.Stdout)
	code := run(o, *kubeconfig, *namespace, *fieldSelector, *labelSelector, *duration, *resync, *httpLines, *handlerLines, *timeout)
	o.Emit("exit", fields{"code": code})
	os.Exit(code)
}

func run(o *out, kubeconfig, namespace, fieldSelector, labelSelector string, duration, resync time.Duration, httpLines, handlerLines bool, timeout time.Duration) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		o.Emit("error", fields{"error": err.Error(), "stage": "kubeconfig"})
		return 2
	}
	cfg.Timeout = timeout
	if httpLines {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &roundTripLogger{next: rt, o: o} })
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		o.Emit("error", fields{"error": err.Error(), "stage": "client"})
		return 2
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if duration > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, duration)
		defer c2()
	}

	tweak := func(opts *metav1.ListOptions) {
		opts.FieldSelector = fieldSelector
		opts.LabelSelector = labelSelector
	}
	base := cache.NewFilteredListWatchFromClient(cs.CoordinationV1().RESTClient(), "leases", namespace, tweak)
	lw := &loggingListWatch{inner: base, tweak: tweak, client: cs, o: o}

	o.Emit("config", fields{
		"host":              cfg.Host,
		"namespace":         namespace,
		"field_selector":    fieldSelector,
		"label_selector":    labelSelector,
		"watch_list_client": clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient),
		"disable_http2":     os.Getenv("DISABLE_HTTP2") != "",
		"client_go":         "v0.37.2",
		"pid":               os.Getpid(),
	})

	informer := cache.NewSharedIndexInformer(lw, &coordinationv1.Lease{}, resync, cache.Indexers{})
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		f := fields{
			"watch_id":    lw.current.Load(),
			"error":       errString(err),
			"expired":     apierrors.IsResourceExpired(err) || apierrors.IsGone(err),
			"eof":         errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF),
			"status_code": nil,
			"reason":      nil,
		}
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			f["status_code"] = st.Status().Code
			f["reason"] = string(st.Status().Reason)
		}
		o.Emit("watch_error", f)
		cache.DefaultWatchErrorHandler(ctx, r, err) // keep client-go's own logging
	}); err != nil {
		o.Emit("error", fields{"error": err.Error(), "stage": "watch error handler"})
		return 2
	}
	if handlerLines {
		notify := func(kind string, obj any) {
			f := fields{"kind": kind, "name": "", "rv": "", "renew_time": nil}
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
				f["tombstone"] = true
			}
			if lease, ok := obj.(*coordinationv1.Lease); ok {
				f["name"] = lease.Name
				f["rv"] = lease.ResourceVersion
				if lease.Spec.RenewTime != nil {
					f["renew_time"] = lease.Spec.RenewTime.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
				}
			}
			o.Emit("notify", f)
		}
		_, err := informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, isInInitialList bool) {
				if isInInitialList {
					notify("add_initial", obj)
				} else {
					notify("add", obj)
				}
			},
			UpdateFunc: func(_, obj any) { notify("update", obj) },
			DeleteFunc: func(obj any) { notify("delete", obj) },
		})
		if err != nil {
			o.Emit("error", fields{"error": err.Error(), "stage": "event handler"})
			return 2
		}
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		informer.RunWithContext(ctx)
	}()
	if cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		o.Emit("synced", fields{"count": len(informer.GetStore().ListKeys()), "last_sync_rv": informer.LastSyncResourceVersion()})
	}
	<-ctx.Done()
	<-done
	return 0
}

// compile-time checks
var (
	_ cache.ListerWatcher            = (*loggingListWatch)(nil)
	_ cache.ListerWatcherWithContext = (*loggingListWatch)(nil)
	_ watch.Interface                = (*loggingWatch)(nil)
)
