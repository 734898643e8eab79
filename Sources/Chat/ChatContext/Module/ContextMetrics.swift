import Metrics

/// The chat context's counters (HELP texts in the executable's `MetricsHelp`).
struct ContextMetrics: Sendable {
    /// `agent_chat_context_resolves_total`: resolves made.
    let resolves = Counter(label: "agent_chat_context_resolves_total")
    /// `agent_chat_context_version`: the latest snapshot's version.
    let version = Gauge(label: "agent_chat_context_version")

    /// `agent_chat_context_pushes_total{outcome}`: accepted, not_accepted, error, unimplemented.
    func push(_ outcome: String) {
        Counter(label: "agent_chat_context_pushes_total", dimensions: [("outcome", outcome)]).increment()
    }

    func resolved(version: UInt64) {
        resolves.increment()
        self.version.record(Double(version))
    }
}
