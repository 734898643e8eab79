import Logging
import Synchronization

/// The agent's most recent log lines, kept in memory for `GET /debug/logs` (what a support
/// bundle collects): the newest lines of what the log file (``RotatingLogFile``) also gets.
///
/// Memory: at most ``maxBytes`` of text; the oldest lines go first, and a single line is cut
/// to ``maxLineBytes``.
public final class RecentLogs: Sendable {
    public static let maxBytes = 1 << 20
    public static let maxLineBytes = 8 << 10

    private struct State {
        var lines: [String] = []
        /// Index of the oldest line in `lines` (a ring over a growing array).
        var head = 0
        var bytes = 0
    }

    private let state = Mutex(State())
    private let limit: Int

    public init(maxBytes: Int = RecentLogs.maxBytes) {
        limit = maxBytes
    }

    /// Adds one line (without its newline); returns it as kept (cut to ``maxLineBytes``).
    @discardableResult
    public func append(_ line: String) -> String {
        var text = line
        if text.utf8.count > Self.maxLineBytes {
            text = String(decoding: text.utf8.prefix(Self.maxLineBytes), as: UTF8.self) + " …"
        }
        let size = text.utf8.count + 1
        state.withLock { s in
            s.lines.append(text)
            s.bytes += size
            while s.bytes > limit, s.head < s.lines.count {
                s.bytes -= s.lines[s.head].utf8.count + 1
                s.lines[s.head] = ""
                s.head += 1
            }
            // Compact once the dropped prefix is as long as what is kept.
            if s.head > 64, s.head * 2 > s.lines.count {
                s.lines.removeFirst(s.head)
                s.head = 0
            }
        }
        return text
    }

    /// Every kept line, oldest first, each ending in a newline.
    public func text() -> String {
        state.withLock { s in
            var out = ""
            out.reserveCapacity(s.bytes)
            for line in s.lines[s.head...] {
                out += line
                out += "\n"
            }
            return out
        }
    }
}

/// The agent's handler around the chosen format's: a record at the base's level or above
/// goes to `base`; a text line of every record to the agent's ``RecentLogs`` and, at
/// `fileLevel` or above, to the log file; warnings and errors that `base` takes go to the
/// ``LogForwarder`` when the logger forwards upward.
struct AgentLogHandler: LogHandler {
    var base: any LogHandler
    let recent: RecentLogs
    let forwarder: LogForwarder?
    let label: String
    var file: RotatingLogFile?
    var fileLevel: Logger.Level
    /// The base writes text lines: control characters in what it is given are escaped.
    var escapesText = false

    init(
        base: any LogHandler, recent: RecentLogs, forwarder: LogForwarder?, label: String, file: RotatingLogFile? = nil,
        fileLevel: Logger.Level = .debug, escapesText: Bool = false
    ) {
        self.escapesText = escapesText
        self.base = base
        self.recent = recent
        self.forwarder = forwarder
        self.label = label
        self.file = file
        self.fileLevel = fileLevel
    }

    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    /// The lower of the base's level and the file's: what reaches ``log(event:)``. A level set
    /// on a logger quiets the file too, never below the file's own.
    var logLevel: Logger.Level {
        get { file == nil ? base.logLevel : min(base.logLevel, fileLevel) }
        set {
            base.logLevel = newValue
            fileLevel = max(fileLevel, newValue)
        }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        let toBase = event.level >= base.logLevel
        if toBase { base.log(event: escapesText ? LogText.escape(event) : event) }
        var line = JSONLogHandler.timestamp() + " " + event.level.rawValue + " " + label + ": " + LogText.escape(event.message.description)
        let merged = base.metadata.merging(event.metadata ?? [:]) { _, new in new }
        for key in merged.keys.sorted() {
            line += " " + key + "=" + "\(LogText.escape(merged[key]!))"
        }
        let kept = recent.append(line)
        if let file, event.level >= fileLevel { file.write(kept) }
        if toBase { forwarder?.forward(level: event.level, source: event.source, message: event.message.description) }
    }
}
