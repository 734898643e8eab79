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

/// Wraps a handler and also hands warnings and errors to a ``LogForwarder``.
struct ForwardingLogHandler: LogHandler {
    var base: any LogHandler
    let forwarder: LogForwarder

    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        base.log(event: event)
        forwarder.forward(level: event.level, source: event.source, message: event.message.description)
    }
}
