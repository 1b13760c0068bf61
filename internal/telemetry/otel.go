package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// scope names the gateway's tracer and meter.
const scope = "github.com/mcp-gateway/mcp-gateway"

// Telemetry is the gateway's tracer, meter and trace propagation, built
// once and passed to the packages that record: there are no global
// providers. The zero of each part is a no-op; see Disabled.
type Telemetry struct {
	// Tracer starts the gateway's spans.
	Tracer trace.Tracer
	// Meter makes the gateway's instruments.
	Meter metric.Meter
	// Propagator reads and writes W3C trace context and baggage.
	Propagator propagation.TextMapPropagator

	metrics  http.Handler
	tracing  bool
	metering bool
	shutdown []func(context.Context) error
}

// Options say what to export.
type Options struct {
	// Prometheus serves metrics as Prometheus text (MetricsHandler).
	Prometheus bool
	// OTLPEndpoint sends traces and metrics over OTLP/HTTP to this base
	// URL (http://collector:4318). Empty: the standard
	// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and
	// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT variables decide, and without
	// them nothing goes over OTLP.
	OTLPEndpoint string
	// Version is the gateway's version, for the service resource.
	Version string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string

	// SpanProcessor and MetricReader, if set, are added (tests record
	// spans and read metrics with them).
	SpanProcessor sdktrace.SpanProcessor
	MetricReader  sdkmetric.Reader
}

// Disabled records nothing, at close to no cost: its tracer and meter
// are no-ops. A host's trace context in a request's _meta still reaches
// the upstream, untouched; one in HTTP headers does not.
func Disabled() *Telemetry {
	return &Telemetry{
		Tracer:     tracenoop.NewTracerProvider().Tracer(scope),
		Meter:      metricnoop.NewMeterProvider().Meter(scope),
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
}

// New builds the providers that o asks for. What nothing asks for stays
// a no-op: without OTLP the tracer records nothing, and without
// Prometheus or OTLP neither does the meter.
func New(ctx context.Context, o Options) (*Telemetry, error) {
	t := Disabled()
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	traceURL, metricURL := otlpEndpoints(o.OTLPEndpoint, getenv)
	res := resource.NewSchemaless(semconv.ServiceName("mcp-gateway"), semconv.ServiceVersion(o.Version))

	var spanOpts []sdktrace.TracerProviderOption
	if traceURL != "" {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(traceURL))
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		spanOpts = append(spanOpts, sdktrace.WithBatcher(exp))
	}
	if o.SpanProcessor != nil {
		spanOpts = append(spanOpts, sdktrace.WithSpanProcessor(o.SpanProcessor))
	}
	if len(spanOpts) > 0 {
		tp := sdktrace.NewTracerProvider(append(spanOpts, sdktrace.WithResource(res))...)
		t.Tracer, t.tracing = tp.Tracer(scope), true
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}

	var readers []sdkmetric.Option
	if o.Prometheus {
		// A registry of the gateway's own, not the global one.
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
		if err != nil {
			return nil, fmt.Errorf("building the Prometheus exporter: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(exp))
		t.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if metricURL != "" {
		exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(metricURL))
		if err != nil {
			return nil, fmt.Errorf("OTLP metric exporter: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if o.MetricReader != nil {
		readers = append(readers, sdkmetric.WithReader(o.MetricReader))
	}
	if len(readers) > 0 {
		opts := append(readers, sdkmetric.WithResource(res))
		if !t.tracing {
			// Exemplars link a measurement to its sampled span; without
			// tracing there is none, and looking for one on every
			// measurement costs every call some time.
			opts = append(opts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
		}
		mp := sdkmetric.NewMeterProvider(opts...)
		t.Meter, t.metering = mp.Meter(scope), true
		t.shutdown = append(t.shutdown, mp.Shutdown)
	}
	return t, nil
}

// otlpEndpoints returns the OTLP/HTTP URLs of traces and metrics: the
// configured base endpoint, else the standard variables (a signal's own
// variable is used as it is; the base one gets /v1/traces or /v1/metrics
// appended, as the OTLP exporter specification says).
func otlpEndpoints(configured string, getenv func(string) string) (traces, metrics string) {
	base := configured
	if base == "" {
		base = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if base != "" {
		base = strings.TrimSuffix(base, "/")
		traces, metrics = base+"/v1/traces", base+"/v1/metrics"
	}
	if configured == "" {
		if v := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
			traces = v
		}
		if v := getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"); v != "" {
			metrics = v
		}
	}
	return traces, metrics
}

// Tracing reports whether spans are recorded; Metering whether
// instruments are.
func (t *Telemetry) Tracing() bool  { return t != nil && t.tracing }
func (t *Telemetry) Metering() bool { return t != nil && t.metering }

// MetricsHandler serves Prometheus text; nil when Prometheus is off.
func (t *Telemetry) MetricsHandler() http.Handler { return t.metrics }

// Shutdown flushes what is buffered and stops the exporters.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}
