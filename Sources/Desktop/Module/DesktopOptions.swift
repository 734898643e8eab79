import AgentCore
import ArgumentParser

/// The desktop's flags and their environment twins.
public struct DesktopOptions: ParsableArguments {
    @Option(name: .long, help: "Stop the desktop after this long with no action, no viewer and no running recording (Go duration, e.g. 30m); 0 keeps it. Env CODER_AGENT_DESKTOP_IDLE_TIMEOUT. Default 0.")
    public var desktopIdleTimeout: String?

    @Option(name: .long, help: "Size of the desktop the agent starts, WxH: each 64 to 8192, at most 33177600 pixels (7680x4320). Env CODER_AGENT_DESKTOP_GEOMETRY. Default 1920x1080.")
    public var desktopGeometry: String?

    public init() {}

    public struct Configuration: Sendable, Equatable {
        public var idleTimeout: Duration?
        public var width = 1920
        public var height = 1080
        /// The silence bound of each call on the agent's VNC connection (no flag: tests shorten it).
        var vncTimeout = VNCClient.defaultTimeout

        public init(idleTimeout: Duration? = nil, width: Int = 1920, height: Int = 1080) {
            self.idleTimeout = idleTimeout
            self.width = width
            self.height = height
        }
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        var configuration = Configuration()
        if let timeout = try settings.parsed(
            desktopIdleTimeout, flag: "--desktop-idle-timeout", variable: "CODER_AGENT_DESKTOP_IDLE_TIMEOUT", { try GoDuration.parse($0) }),
            timeout > .zero
        {
            configuration.idleTimeout = timeout
        }
        if let geometry = try settings.string(desktopGeometry, flag: "--desktop-geometry", variable: "CODER_AGENT_DESKTOP_GEOMETRY") {
            // Within the screenshot's bounds: a larger desktop could not be captured whole, and
            // every screenshot without a declared size would fail.
            let parts = geometry.split(separator: "x").compactMap { Int($0) }
            guard parts.count == 2, (64...DesktopLimits.maxSide).contains(parts[0]), (64...DesktopLimits.maxSide).contains(parts[1]),
                parts[0] * parts[1] <= DesktopLimits.maxPixels
            else {
                throw ConfigurationError(
                    "invalid value \"\(geometry)\" for --desktop-geometry: expected WxH, each 64 to \(DesktopLimits.maxSide), at most \(DesktopLimits.maxPixels) pixels in all (as 7680x4320: the largest screenshot)"
                )
            }
            (configuration.width, configuration.height) = (parts[0], parts[1])
        }
        return configuration
    }
}
