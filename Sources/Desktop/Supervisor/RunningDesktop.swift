/// A started desktop: where its VNC server listens and how large its screen is.
public struct DesktopInfo: Sendable, Equatable {
    /// The loopback port of the RFB server.
    public var vncPort: Int
    public var width: Int
    public var height: Int
    /// The X display number (`:10` is 10); -1 when unknown (a portabledesktop that reported
    /// none: then screenshots and `cursor_position` fail, since they read the X server).
    public var display: Int

    public init(vncPort: Int, width: Int, height: Int, display: Int) {
        self.vncPort = vncPort
        self.width = width
        self.height = height
        self.display = display
    }

    /// What processes started while it runs get in their environment: its `DISPLAY` (no
    /// `XAUTHORITY`: the agent's Xvnc and portabledesktop's run without X authorization).
    public var environment: [String: String] {
        display >= 0 ? ["DISPLAY": ":\(display)"] : [:]
    }
}

/// One desktop instance: its info, whether it still serves, and how to stop it.
protocol RunningDesktop: Sendable {
    var info: DesktopInfo { get }
    /// The process behind it still runs (a crash is seen at once, not at the next use).
    var isAlive: Bool { get }
    /// Stops it and everything it started; bounded.
    func stop() async
}

/// Starts desktops one way (portabledesktop, or Xvnc directly).
protocol DesktopLauncher: Sendable {
    /// What it runs, for logs ("portabledesktop at …", "Xvnc at …").
    var summary: String { get }
    func start() async throws(DesktopError) -> any RunningDesktop
}

/// Why a desktop could not start or be used; `description` becomes the JSON `detail`.
public struct DesktopError: Error, CustomStringConvertible, Sendable, Equatable {
    public var description: String
    /// The desktop did not answer within a bound (trying again at once would wait as long).
    var timedOut = false

    public init(_ description: String) { self.description = description }

    init(_ description: String, timedOut: Bool) {
        self.description = description
        self.timedOut = timedOut
    }

    static let closed = DesktopError("desktop closed")
}
