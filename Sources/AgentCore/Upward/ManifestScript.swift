/// One `coder_script` of the manifest (`WorkspaceAgentScript`), as the control plane sent it.
public struct ManifestScript: Sendable, Equatable {
    /// The script's UUID (16 bytes), reported in `ScriptCompleted`.
    public var id: [UInt8]
    /// The UUID (16 bytes) its log lines are sent under.
    public var logSourceID: [UInt8]
    /// Unexpanded: `~` and `$VAR` are expanded when it runs; empty means the default name.
    public var logPath: String
    public var script: String
    /// Seconds first (`second minute hour dom month [dow]`), or a descriptor; empty for none.
    public var cron: String
    public var runOnStart: Bool
    public var runOnStop: Bool
    public var startBlocksLogin: Bool
    /// Zero for none.
    public var timeout: Duration
    public var displayName: String

    public init(
        id: [UInt8], logSourceID: [UInt8], logPath: String = "", script: String, cron: String = "",
        runOnStart: Bool = false, runOnStop: Bool = false, startBlocksLogin: Bool = false,
        timeout: Duration = .zero, displayName: String = ""
    ) {
        self.id = id
        self.logSourceID = logSourceID
        self.logPath = logPath
        self.script = script
        self.cron = cron
        self.runOnStart = runOnStart
        self.runOnStop = runOnStop
        self.startBlocksLogin = startBlocksLogin
        self.timeout = timeout
        self.displayName = displayName
    }
}

/// One metadata key of the manifest (`WorkspaceAgentMetadata.Description`), with its
/// interval and timeout already read as coderd means them (``seconds(fromWire:)``).
public struct ManifestMetadata: Sendable, Equatable {
    public var key: String
    public var displayName: String
    public var script: String
    /// Zero: collected once per connection.
    public var interval: Duration
    /// Zero: the interval, else 3 s.
    public var timeout: Duration

    public init(key: String, displayName: String = "", script: String, interval: Duration, timeout: Duration = .zero) {
        self.key = key
        self.displayName = displayName
        self.script = script
        self.interval = interval
        self.timeout = timeout
    }

    /// coderd stores metadata intervals as whole seconds and sends `Duration(N)` with N
    /// counted in nanoseconds (`{nanos: 5}` for 5 s); the reference agent reads the total
    /// nanosecond count back as seconds. A Duration with whole seconds set (a control plane
    /// that encodes properly) is taken as it is.
    public static func seconds(fromWire seconds: Int64, nanos: Int32) -> Duration {
        if seconds > 0 { return .seconds(min(seconds, maxSeconds)) + .nanoseconds(Int64(max(0, nanos))) }
        return .seconds(Int64(max(0, nanos)))
    }

    /// The longest interval, timeout or period the agent takes from a manifest (10 years):
    /// longer ones count as this, so deadlines never overflow the clock's arithmetic.
    public static let maxSeconds: Int64 = 315_360_000
}

/// One app of the manifest (`WorkspaceApp`), as far as its health check goes.
public struct ManifestApp: Sendable, Equatable {
    /// The wire values of `WorkspaceApp.Health` (and the top-level `AppHealth`).
    public enum Health: Int, Sendable, Equatable {
        case unspecified = 0
        case disabled = 1
        case initializing = 2
        case healthy = 3
        case unhealthy = 4
    }

    /// The app's UUID (16 bytes).
    public var id: [UInt8]
    public var slug: String
    public var healthcheckURL: String
    /// Zero: not checked.
    public var healthcheckInterval: Duration
    public var healthcheckThreshold: Int32
    /// The control plane's stored state: where tracking starts.
    public var health: Health

    public init(
        id: [UInt8], slug: String = "", healthcheckURL: String = "", healthcheckInterval: Duration = .zero,
        healthcheckThreshold: Int32 = 0, health: Health = .disabled
    ) {
        self.id = id
        self.slug = slug
        self.healthcheckURL = healthcheckURL
        self.healthcheckInterval = healthcheckInterval
        self.healthcheckThreshold = healthcheckThreshold
        self.health = health
    }
}
