import Logging
import Synchronization

/// Carries the agent's own warnings and errors to a sink set later (the control-plane
/// session ships them upward with BatchCreateLogs).
public final class LogForwarder: Sendable {
    public typealias Sink = @Sendable (_ level: Logger.Level, _ message: String) -> Void

    public static let shared = LogForwarder()

    private let sink = Mutex<Sink?>(nil)

    /// Records forwarded from loggers with these label prefixes are not forwarded (the
    /// upward session's own failures would otherwise feed themselves).
    public static let excludedLabelPrefixes = ["workspace-agent.rpc"]

    public func setSink(_ newSink: Sink?) {
        sink.withLock { $0 = newSink }
    }

    func forward(label: String, level: Logger.Level, message: String) {
        guard level >= .warning, !Self.excludedLabelPrefixes.contains(where: { label.hasPrefix($0) }) else { return }
        sink.withLock { $0 }?(level, message)
    }
}

/// Wraps a handler and also hands warnings and errors to ``LogForwarder/shared``.
struct ForwardingLogHandler: LogHandler {
    var base: any LogHandler
    let label: String

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
        LogForwarder.shared.forward(label: label, level: event.level, message: event.message.description)
    }
}
