package flightserver

import (
	"net/http"
	"time"

	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

// metrics are the server's Prometheus metrics (docs/operations.md). Each
// Server has its own registry, so tests can run many servers in one
// process.
type metrics struct {
	reg         *prometheus.Registry
	rpcs        *prometheus.CounterVec
	durations   *prometheus.HistogramVec
	actions     *prometheus.CounterVec
	rows        *prometheus.CounterVec
	bytes       *prometheus.CounterVec
	commits     *prometheus.CounterVec
	lockTimeout prometheus.Counter
	lockWaits   *prometheus.HistogramVec
	problems    *prometheus.CounterVec
	verifies    prometheus.Counter
	streams     *prometheus.GaugeVec
	authFail    prometheus.Counter
	denials     *prometheus.CounterVec
	idle        prometheus.Counter
	sendIdle    prometheus.Counter
	panics      *prometheus.CounterVec

	inflight         *prometheus.GaugeVec
	inflightWaits    *prometheus.CounterVec
	inflightRefusals *prometheus.CounterVec
	dormant          prometheus.Gauge
	limitRefusals    *prometheus.CounterVec

	pwChecks   prometheus.Counter
	pwCached   prometheus.Counter
	pwRefused  *prometheus.CounterVec
	pwInFlight prometheus.Gauge

	conns     prometheus.Gauge
	connWaits prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_rpc_requests_total",
			Help: "RPCs finished, by method and gRPC status code.",
		}, []string{"method", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "quiver_rpc_duration_seconds",
			Help:    "RPC duration, by method and gRPC status code.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 60, 300, 1800},
		}, []string{"method", "code"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_actions_total",
			Help: "DoAction calls finished, by action type and gRPC status code.",
		}, []string{"action", "code"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_rows_total",
			Help: "Rows received by DoPut (direction=in) and sent by DoGet (direction=out).",
		}, []string{"direction"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_bytes_total",
			Help: "IPC message bytes (metadata and body) received by DoPut (direction=in) and sent by DoGet (direction=out).",
		}, []string{"direction"}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_commits_total",
			Help: "Commit records published, by kind (append, write, compact). Replayed puts are not counted.",
		}, []string{"kind"}),
		lockTimeout: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_lock_timeouts_total",
			Help: "Writers that gave up waiting for a manifest lock (answered Unavailable).",
		}),
		lockWaits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "quiver_lock_wait_seconds",
			Help:    "Time writers waited for a manifest lock, by outcome (acquired, or timeout: gave up or cancelled).",
			Buckets: []float64{.0005, .001, .005, .01, .05, .1, .5, 1, 5, 10, 30},
		}, []string{"outcome"}),
		problems: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_verify_problems_total",
			Help: "Problems reported by verify actions, by kind.",
		}, []string{"kind"}),
		verifies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_verify_runs_total",
			Help: "Verify actions completed.",
		}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "quiver_open_streams",
			Help: "Streaming RPCs in progress, by method.",
		}, []string{"method"}),
		authFail: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_auth_failures_total",
			Help: "RPCs refused as Unauthenticated.",
		}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_permission_denied_total",
			Help: "Operations refused as PermissionDenied, by RPC or action.",
		}, []string{"op"}),
		idle: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_idle_stream_timeouts_total",
			Help: "Streams cancelled because no message moved for the idle timeout.",
		}),
		sendIdle: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_send_timeouts_total",
			Help: "Streams cancelled because the client accepted no message for the send timeout.",
		}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_panics_total",
			Help: "Panics recovered in RPCs (answered Internal; the server kept serving), by method.",
		}, []string{"method"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "quiver_inflight_bytes",
			Help: "Bytes of the in-flight inbound message budgets reserved now, by pool (data: --max-inflight-bytes; request).",
		}, []string{"pool"}),
		inflightWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_inflight_waits_total",
			Help: "Receives that had to wait for room in an in-flight budget, by pool.",
		}, []string{"pool"}),
		inflightRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_inflight_refusals_total",
			Help: "Receives refused ResourceExhausted because an in-flight budget stayed full, by pool.",
		}, []string{"pool"}),
		dormant: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quiver_inflight_dormant_receives",
			Help: "Receives of paused puts that hold no room in the data budget now (their clients sent nothing for a while).",
		}),
		limitRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_limit_refusals_total",
			Help: "Puts refused by a schema or decode limit, by limit (columns, depth, decode).",
		}, []string{"limit"}),
		pwChecks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_password_checks_total",
			Help: "bcrypt password checks run by basic-auth handshakes.",
		}),
		pwCached: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_password_cache_hits_total",
			Help: "Basic-auth handshakes answered from the cache of recent successful checks.",
		}),
		pwRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_password_refusals_total",
			Help: "Basic-auth handshakes refused before any password check, by reason (peer_rate, global_rate, queue_full, queue_timeout).",
		}, []string{"reason"}),
		pwInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quiver_password_checks_running",
			Help: "bcrypt password checks running now.",
		}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quiver_open_connections",
			Help: "Client connections open now (at most --max-connections).",
		}),
		connWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_connection_limit_waits_total",
			Help: "Times the server stopped accepting connections because --max-connections were open.",
		}),
	}
	m.reg.MustRegister(m.rpcs, m.durations, m.actions, m.rows, m.bytes, m.commits, m.lockTimeout, m.lockWaits,
		m.problems, m.verifies, m.streams, m.authFail, m.denials, m.idle,
		m.sendIdle, m.panics, m.inflight, m.inflightWaits, m.inflightRefusals, m.dormant, m.limitRefusals,
		m.pwChecks, m.pwCached, m.pwRefused, m.pwInFlight, m.conns, m.connWaits,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, d := range []string{"in", "out"} {
		m.rows.WithLabelValues(d)
		m.bytes.WithLabelValues(d)
	}
	for _, k := range []string{string(store.ModeAppend), string(store.ModeWrite), "compact"} {
		m.commits.WithLabelValues(k)
	}
	return m
}

// unknownLabel is the label value of every client-supplied name outside
// the fixed set a metric knows (an action type no action has, a method no
// service registered): a label per distinct client string would keep a
// series, and its memory, for every string any caller ever sent.
const unknownLabel = "unknown"

// knownActions are the action types that are metric labels of their own.
var knownActions = func() map[string]bool {
	m := make(map[string]bool, len(catalog.ActionTypes))
	for _, a := range catalog.ActionTypes {
		m[a.Type] = true
	}
	return m
}()

// actionLabel is the metric label of an action type: the type if the
// server has that action, else unknownLabel.
func actionLabel(typ string) string {
	if knownActions[typ] {
		return typ
	}
	return unknownLabel
}

// methodLabel is the metric label of an RPC method name: the name if
// Required or the Flight and health services know it, else unknownLabel.
// gRPC answers a method no service registered before any interceptor
// runs; this guards that contract for the metrics.
func methodLabel(name string) string {
	if knownMethods[name] {
		return name
	}
	return unknownLabel
}

// knownMethods are the method names of the Flight and health services.
var knownMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, d := range []grpc.ServiceDesc{flightgen.FlightService_ServiceDesc, healthpb.Health_ServiceDesc} {
		for _, md := range d.Methods {
			m[md.MethodName] = true
		}
		for _, sd := range d.Streams {
			m[sd.StreamName] = true
		}
	}
	return m
}()

func (m *metrics) rpc(method string, code codes.Code, d time.Duration, action string, ri *rpcInfo) {
	c := code.String()
	method = methodLabel(method)
	m.rpcs.WithLabelValues(method, c).Inc()
	m.durations.WithLabelValues(method, c).Observe(d.Seconds())
	if action != "" {
		m.actions.WithLabelValues(actionLabel(action), c).Inc()
	}
	switch method {
	case "DoPut":
		m.rows.WithLabelValues("in").Add(float64(ri.rows.Load()))
		m.bytes.WithLabelValues("in").Add(float64(ri.bytes.Load()))
	case "DoGet":
		m.rows.WithLabelValues("out").Add(float64(ri.rows.Load()))
		m.bytes.WithLabelValues("out").Add(float64(ri.bytes.Load()))
	}
}

func (m *metrics) commit(kind string) { m.commits.WithLabelValues(kind).Inc() }

// lockWait observes one manifest lock attempt of the store.
func (m *metrics) lockWait(d time.Duration, acquired bool) {
	outcome := "acquired"
	if !acquired {
		outcome = "timeout"
	}
	m.lockWaits.WithLabelValues(outcome).Observe(d.Seconds())
}
func (m *metrics) denied(op string) {
	if !knownActions[op] {
		op = methodLabel(op)
	}
	m.denials.WithLabelValues(op).Inc()
}
func (m *metrics) unauthenticated() { m.authFail.Inc() }
func (m *metrics) idleTimeout()     { m.idle.Inc() }
func (m *metrics) sendTimeout()     { m.sendIdle.Inc() }
func (m *metrics) panic(method string) {
	m.panics.WithLabelValues(methodLabel(method)).Inc()
}
func (m *metrics) streamOpen(method string) func() {
	g := m.streams.WithLabelValues(methodLabel(method))
	g.Inc()
	return g.Dec
}

func (m *metrics) verify(rep *maint.VerifyReport) {
	m.verifies.Inc()
	for _, p := range rep.Problems {
		m.problems.WithLabelValues(p.Kind).Inc()
	}
}

// MetricsHandler serves the server's metrics in the Prometheus text
// format.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// Registry is the Prometheus registry of the server's metrics, for
// registering more collectors.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }
