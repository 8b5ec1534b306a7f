// Command agentd runs AI agents behind gRPC.
//
// Every flag can also be set through an environment variable named AGENTD_ followed by the
// flag's name in upper case with dashes as underscores (--listen: AGENTD_LISTEN). A flag on
// the command line wins over the environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/agentd/agentd/service"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "agentd:", err)
		os.Exit(1)
	}
}

// config is agentd's configuration, from flags and AGENTD_* variables.
type config struct {
	listen          string
	shutdownTimeout time.Duration
	logLevel        slog.Level
}

// parseConfig reads flags from args, then fills every flag not given on the command line
// from its AGENTD_* variable.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("agentd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.listen, "listen", "localhost:50051", "`address` to serve gRPC on")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long open streams may take to finish after SIGTERM before they are closed")
	fs.TextVar(&cfg.logLevel, "log-level", slog.LevelInfo, "minimum `level` of logs: debug, info, warn, error")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: agentd [flags]\n\nagentd runs AI agents behind gRPC (agentd.v1.AgentService).\n"+
			"Each flag may also be set as AGENTD_<FLAG> in the environment (--listen: AGENTD_LISTEN).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		name := envName(f.Name)
		if v := getenv(name); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
		}
	})
	return cfg, errors.Join(errs...)
}

// envName is the environment variable that stands in for the flag name.
func envName(flagName string) string {
	return "AGENTD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	lis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, lis, log)
}

// serve runs agentd on lis until ctx is done, then shuts down gracefully: health turns
// NOT_SERVING, open streams get cfg.shutdownTimeout to finish, then are closed.
func serve(ctx context.Context, cfg config, lis net.Listener, log *slog.Logger) error {
	srv, err := service.New(service.Config{Logger: log})
	if err != nil {
		lis.Close()
		return err
	}
	gs := grpc.NewServer()
	srv.Register(gs)

	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	log.Info("agentd listening", "addr", lis.Addr().String())

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", cfg.shutdownTimeout.String())
	srv.Drain()
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := service.GracefulStop(stopCtx, gs); err != nil {
		log.Warn("shutdown timeout reached: closed open streams")
	}
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	log.Info("agentd stopped")
	return nil
}
