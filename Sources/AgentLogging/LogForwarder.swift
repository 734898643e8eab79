import AgentCore
import Logging
import Synchronization

/// Carries the agent's own warnings and errors to the upward seam, once connected (the
/// control-plane session ships them with BatchCreateLogs). Before ``connect(to:)`` they
/// are only written locally.
public final class LogForwarder: Sendable {
    private let sink = Mutex<(any UpwardSink)?>(nil)
    /// Per source and level, a bounded share of what goes upward.
    private let gate = Mutex(LogFloodGate())

    public init() {}

    /// Forwards from now on to `upward`.
    public func connect(to upward: any UpwardSink) {
        sink.withLock { $0 = upward }
    }

    func forward(level: Logger.Level, source: String, message: String) {
        guard level >= .warning, let upward = sink.withLock({ $0 }) else { return }
        guard let admitted = gate.withLock({ $0.admit(source: source, level: level, message: message) }) else { return }
        upward.send(AgentLogLine(level: level >= .error ? .error : .warn, message: admitted))
    }
}
