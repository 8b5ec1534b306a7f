package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// telemetryShutdownTimeout bounds the flush of the last spans and metrics on exit.
const telemetryShutdownTimeout = 5 * time.Second

// telemetry is agentd's OpenTelemetry SDK, configured by the standard variables alone:
//
//   - OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER: otlp, console, none (and prometheus
//     for metrics, which serves OTEL_EXPORTER_PROMETHEUS_HOST:PORT). Unset means none:
//     nothing is exported unless asked, whatever the SDK's own default.
//   - OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL (grpc, http/protobuf) and
//     the rest of the OTLP exporters' variables.
//   - OTEL_SERVICE_NAME (default agentd), OTEL_RESOURCE_ATTRIBUTES.
//   - OTEL_TRACES_SAMPLER, OTEL_BSP_*, OTEL_METRIC_EXPORT_INTERVAL: read by the SDK.
//
// --metrics-listen adds a Prometheus scrape endpoint of its own. Trace context is
// propagated as W3C traceparent and baggage.
type telemetry struct {
	// The providers, or nil when the signal goes nowhere: the runtime then uses the
	// global no-ops, and costs next to nothing.
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	shutdowns      []func(context.Context) error
}

// setupTelemetry builds the SDK from the environment and installs it as OpenTelemetry's
// globals, for the gRPC stats handler and any instrumented client. Call shutdown when done.
func setupTelemetry(ctx context.Context, cfg config, log *slog.Logger) (_ *telemetry, err error) {
	tel := &telemetry{}
	defer func() {
		if err != nil {
			tel.shutdown(log)
		}
	}()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("agentd")), // OTEL_SERVICE_NAME wins
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	switch {
	case errors.Is(err, resource.ErrPartialResource):
		log.Warn("OTEL_RESOURCE_ATTRIBUTES: some attributes were not understood", "error", err)
	case err != nil:
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}

	spans, err := autoexport.NewSpanExporter(ctx, autoexport.WithFallbackSpanExporter(none[sdktrace.SpanExporter]))
	if err != nil {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER: %w", err)
	}
	if spans != nil && !autoexport.IsNoneSpanExporter(spans) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
		tel.shutdowns = append(tel.shutdowns, tp.Shutdown)
		tel.tracerProvider = tp
	}

	var readers []sdkmetric.Reader
	reader, err := autoexport.NewMetricReader(ctx, autoexport.WithFallbackMetricReader(none[sdkmetric.Reader]))
	if err != nil {
		return nil, fmt.Errorf("OTEL_METRICS_EXPORTER: %w", err)
	}
	if reader != nil && !autoexport.IsNoneMetricReader(reader) {
		readers = append(readers, reader)
	}
	if cfg.metricsListen != "" {
		r, err := tel.serveMetrics(cfg.metricsListen, log)
		if err != nil {
			for _, r := range readers {
				r.Shutdown(ctx)
			}
			return nil, err
		}
		readers = append(readers, r)
	}
	if len(readers) > 0 {
		opts := []sdkmetric.Option{sdkmetric.WithResource(res)}
		for _, r := range readers {
			opts = append(opts, sdkmetric.WithReader(r))
		}
		mp := sdkmetric.NewMeterProvider(opts...)
		tel.shutdowns = append(tel.shutdowns, mp.Shutdown)
		tel.meterProvider = mp
	}
	if tel.tracerProvider == nil && tel.meterProvider == nil {
		return tel, nil
	}

	// The daemon's globals: the gRPC stats handler, and any instrumented client a model
	// adapter or tool source uses, find the SDK there.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("opentelemetry: " + err.Error())
	}))
	if tel.tracerProvider != nil {
		otel.SetTracerProvider(tel.tracerProvider)
	}
	if tel.meterProvider != nil {
		otel.SetMeterProvider(tel.meterProvider)
	}
	log.Info("opentelemetry",
		"traces", envOr("OTEL_TRACES_EXPORTER", "none"), "metrics", envOr("OTEL_METRICS_EXPORTER", "none"),
		"metrics_listen", cfg.metricsListen, "record_content", cfg.recordContent)
	return tel, nil
}

// none is autoexport's fallback: with the variable unset, nothing is exported.
func none[T any](context.Context) (T, error) {
	var zero T
	return zero, nil
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// serveMetrics serves a Prometheus scrape endpoint, /metrics, on addr, on an HTTP server
// of its own, and returns the reader that feeds it.
func (tel *telemetry) serveMetrics(addr string, log *slog.Logger) (sdkmetric.Reader, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		exp.Shutdown(context.Background())
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint failed", "addr", lis.Addr().String(), "error", err)
		}
	}()
	// The endpoint stops after the meter provider (whose Shutdown ends the reader) has
	// flushed: shutdowns run last to first.
	tel.shutdowns = append(tel.shutdowns, func(ctx context.Context) error {
		err := srv.Shutdown(ctx)
		<-served
		return err
	})
	log.Info("metrics endpoint listening", "addr", lis.Addr().String(), "path", "/metrics")
	return exp, nil
}

// shutdown flushes what is left to export and stops the exporters and the metrics
// endpoint, within telemetryShutdownTimeout.
func (tel *telemetry) shutdown(log *slog.Logger) {
	if tel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), telemetryShutdownTimeout)
	defer cancel()
	var errs []error
	for i := len(tel.shutdowns) - 1; i >= 0; i-- {
		errs = append(errs, tel.shutdowns[i](ctx))
	}
	tel.shutdowns = nil
	if err := errors.Join(errs...); err != nil {
		log.Warn("opentelemetry shutdown: some telemetry may be lost", "error", err)
	}
}
