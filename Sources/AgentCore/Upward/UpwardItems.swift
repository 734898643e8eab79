import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// An app's status for the control plane (`coder.agent.v2.UpdateAppStatusRequest`).
public struct AppStatusReport: Sendable, Equatable {
    /// The wire values of `AppStatusState`.
    public enum State: Int, Sendable, Equatable {
        case working = 0
        case idle = 1
        case complete = 2
        case failure = 3
    }

    /// The control plane refuses messages longer than this many bytes.
    public static let maxMessageBytes = 160
    /// Beyond the reference, which passes them on whole: a slug and a URI longer than these
    /// are refused by the agent (no app's slug is that long; a URI of 8 KiB is past what
    /// browsers and proxies take), so a 3 MiB slug is not logged and sent upward.
    public static let maxSlugBytes = 256
    public static let maxURIBytes = 8192

    public var slug: String
    public var state: State
    public var message: String
    public var uri: String

    public init(slug: String, state: State, message: String = "", uri: String = "") {
        self.slug = slug
        self.state = state
        self.message = message
        self.uri = uri
    }
}

/// A batch of boundary audit logs for the control plane
/// (`coder.agent.v2.ReportBoundaryLogsRequest`).
public struct BoundaryLogBatch: Sendable, Equatable {
    /// A protobuf `Timestamp` as it arrived: seconds and nanoseconds kept as integers, so
    /// the time reaches the control plane exactly (a `Date` would round the nanoseconds).
    public struct Timestamp: Sendable, Equatable {
        public var seconds: Int64
        public var nanos: Int32

        public init(seconds: Int64, nanos: Int32) {
            self.seconds = seconds
            self.nanos = nanos
        }
    }

    /// One audited request.
    public struct Entry: Sendable, Equatable {
        public var allowed: Bool
        /// When it happened, exactly as the producer said; nil when it did not say.
        public var time: Timestamp?
        /// The HTTP request, when the resource was one.
        public var httpRequest: HTTPRequest?
        public var sequenceNumber: Int32

        public init(allowed: Bool, time: Timestamp?, httpRequest: HTTPRequest?, sequenceNumber: Int32 = 0) {
            self.allowed = allowed
            self.time = time
            self.httpRequest = httpRequest
            self.sequenceNumber = sequenceNumber
        }
    }

    /// `BoundaryLog.HttpRequest`.
    public struct HTTPRequest: Sendable, Equatable {
        public var method: String
        public var url: String
        public var matchedRule: String

        public init(method: String, url: String, matchedRule: String = "") {
            self.method = method
            self.url = url
            self.matchedRule = matchedRule
        }
    }

    public var entries: [Entry]
    /// One per boundary process (a UUID string, possibly empty from old producers).
    public var sessionID: String
    public var confinedProcessName: String

    public init(entries: [Entry], sessionID: String = "", confinedProcessName: String = "") {
        self.entries = entries
        self.sessionID = sessionID
        self.confinedProcessName = confinedProcessName
    }
}

/// One of the agent's own log lines for the control plane (`coder.agent.v2.Log`).
public struct AgentLogLine: Sendable, Equatable {
    /// The wire values of `Log.Level` the agent sends.
    public enum Level: Int, Sendable, Equatable {
        case trace = 1
        case debug = 2
        case info = 3
        case warn = 4
        case error = 5
    }

    public var level: Level
    public var message: String
    public var createdAt: Date

    public init(level: Level, message: String, createdAt: Date = Date()) {
        self.level = level
        self.message = message
        self.createdAt = createdAt
    }
}

/// One SSH or terminal connection's start or end for the control plane's connection log
/// (`ReportConnection`).
public struct ConnectionReport: Sendable, Equatable {
    public enum Action: Int, Sendable, Equatable {
        case connect = 1
        case disconnect = 2
    }

    /// The wire values of `Connection.Type`.
    public enum Kind: Int, Sendable, Equatable {
        case unspecified = 0
        case ssh = 1
        case vscode = 2
        case jetbrains = 3
        case reconnectingPTY = 4
    }

    /// 16 random bytes, shared by a connection's connect and disconnect.
    public var id: [UInt8]
    public var action: Action
    public var kind: Kind
    public var timestamp: Date
    /// The remote address without its port; may be empty.
    public var ip: String
    public var statusCode: Int32
    public var reason: String?

    public init(
        id: [UInt8], action: Action, kind: Kind, timestamp: Date = Date(), ip: String, statusCode: Int32 = 0, reason: String? = nil
    ) {
        self.id = id
        self.action = action
        self.kind = kind
        self.timestamp = timestamp
        self.ip = ip
        self.statusCode = statusCode
        self.reason = reason
    }

    /// A fresh random id.
    public static func newID() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }
}
