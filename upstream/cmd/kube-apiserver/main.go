// Command kube-apiserver is upstream's kube-apiserver (k8s.io/kubernetes
// v1.37.2, cmd/kube-apiserver/app) with three additions the prober's lab needs:
//
//   - OpenShift's opt-in shutdown response header (X-OpenShift-Disruption) and
//     its audit annotations for requests received during graceful termination;
//   - tunable identity-Lease timings (env PROBER_IDENTITY_LEASE_*);
//   - one JSON line on stdout for every lifecycle instant it can observe.
//
// Everything else (flags, defaults, the handler chain, the shutdown sequence) is
// upstream's, linked as a Go module dependency. Upstream's
// app.NewAPIServerCommand builds its whole server inside a closure, so the
// generic config (whose BuildHandlerChainFunc and SecureServing.Listener we
// wrap) is not reachable from it; this command therefore assembles the same
// steps from the exported pieces of the app package: options.NewServerRunOptions,
// app.NewConfig, app.CreateServerChain, PrepareRun, Run.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // for timeZone support in CronJob, as upstream's main

	"github.com/spf13/cobra"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream's main
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream's main
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream's main
	"k8s.io/component-base/term"
	utilversion "k8s.io/component-base/version"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

func main() {
	events := newEventLog(os.Stdout)

	leaseSettings, err := applyIdentityLeaseEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-apiserver (prober): %v\n", err)
		os.Exit(2)
	}

	command, started := newCommand(events, leaseSettings)
	code := cli.Run(command)
	if *started {
		events.Emit("exit", fields{"code": code})
	}
	os.Exit(code)
}

// newCommand returns a cobra command with upstream's flags, defaults and
// validation. started is set once the server run begins (not for --help or
// --version), so that main only reports an exit for a real run.
func newCommand(events *eventLog, leaseSettings fields) (*cobra.Command, *bool) {
	started := new(bool)
	s := options.NewServerRunOptions()

	// The one signal context of this process: the first SIGTERM/SIGINT cancels
	// it, which is the instant upstream's RunWithContext turns into
	// ShutdownInitiated; a second signal exits at once (upstream behaviour).
	ctx := genericapiserver.SetupSignalContext()
	watchSignals(events)

	featureGate := s.GenericServerRunOptions.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)

	cmd := &cobra.Command{
		Use: "kube-apiserver",
		Long: `The Kubernetes API server (upstream k8s.io/kubernetes, built as a module
dependency) with the OpenShift shutdown response header, graceful-termination
audit annotations, tunable identity-Lease timings and JSON lifecycle lines on
stdout, for the prober's lab.`,
		SilenceUsage: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
				return err
			}
			// the loopback clients must not log self-issued warnings (as upstream)
			rest.SetDefaultWarningHandler(rest.NoWarnings{})
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			verflag.PrintAndExitIfRequested()
			if err := logsapi.ValidateAndApply(s.Logs, featureGate); err != nil {
				return err
			}
			cliflag.PrintFlags(cmd.Flags())

			completed, err := s.Complete(ctx)
			if err != nil {
				return err
			}
			if errs := completed.Validate(); len(errs) != 0 {
				return utilerrors.NewAggregate(errs)
			}
			featureGate.(featuregate.MutableFeatureGate).AddMetrics()
			s.GenericServerRunOptions.ComponentGlobalsRegistry.AddMetrics()

			*started = true
			events.Emit("start", fields{
				"pid":            os.Getpid(),
				"version":        utilversion.Get().GitVersion,
				"identity_lease": leaseSettings,
			})
			return run(ctx, completed, events)
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if len(arg) > 0 {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}
	cmd.SetContext(ctx)

	fs := cmd.Flags()
	namedFlagSets := s.Flags()
	s.Flagz = flagz.NamedFlagSetsReader{FlagSets: namedFlagSets}
	verflag.AddFlags(namedFlagSets.FlagSet("global"))
	globalflag.AddGlobalFlags(namedFlagSets.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	for _, f := range namedFlagSets.FlagSets {
		fs.AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, namedFlagSets, cols)

	return cmd, started
}

// run is upstream's app.Run with our hooks placed between building the config
// and building the server chain.
func run(ctx context.Context, opts options.CompletedOptions, events *eventLog) error {
	klog.Infof("Version: %+v", utilversion.Get())
	klog.InfoS("Golang settings", "GOGC", os.Getenv("GOGC"), "GOMAXPROCS", os.Getenv("GOMAXPROCS"), "GOTRACEBACK", os.Getenv("GOTRACEBACK"))

	if opts.InformerName == nil {
		name, err := cache.NewInformerName("kube-apiserver")
		if err != nil {
			return err
		}
		opts.InformerName = name
	}

	config, err := app.NewConfig(opts)
	if err != nil {
		return err
	}

	// The aggregator is the outermost server of the chain: its handler chain is
	// the one serving the secure port (the inner servers are reached through its
	// director, without their own chains).
	outer := &config.Aggregator.GenericConfig.Config
	d := newDisruption(outer.ShutdownDelayDuration, outer.APIServerID, outer.ShutdownInitiatedNotify(), events)
	if outer.SecureServing != nil && outer.SecureServing.Listener != nil {
		outer.SecureServing.Listener = d.wrapListener(outer.SecureServing.Listener)
	}
	upstreamChain := outer.BuildHandlerChainFunc
	outer.BuildHandlerChainFunc = func(apiHandler http.Handler, c *genericapiserver.Config) http.Handler {
		return d.wrapChain(apiHandler, c, upstreamChain)
	}

	completed, err := config.Complete()
	if err != nil {
		return err
	}
	server, err := app.CreateServerChain(completed)
	if err != nil {
		return err
	}
	prepared, err := server.PrepareRun()
	if err != nil {
		return err
	}

	watchLifecycle(server.GenericAPIServer, outer, events)
	startReadyPoller(ctx, outer.LoopbackClientConfig, outer.APIServerID, events)

	return prepared.Run(ctx)
}

// watchSignals reports the termination signals this process receives (in
// addition to, not instead of, upstream's own handler).
func watchSignals(events *eventLog) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for sig := range ch {
			events.Emit("signal_received", fields{"signal": sig.String()})
		}
	}()
}
