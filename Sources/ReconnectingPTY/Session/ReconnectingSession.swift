import NIOCore

/// One reconnecting-PTY session as its connections see it, whichever backend serves it
/// (``PTYSession``, the buffered one, or ``ScreenSession``).
protocol ReconnectingSession: AnyObject, Sendable {
    /// The client's ID.
    var id: String { get }
    /// Attaches `channel` (its init's size); closes it when the session is full or ended.
    func attach(_ channel: any Channel, size: (rows: UInt16, columns: UInt16))
    /// An attached connection's input object.
    func input(_ input: PTYInput, from channel: any Channel)
    /// `channel` (attached) can take more output.
    func attachmentWritable(_ channel: any Channel)
    /// Ends the session (expiry, the agent's shutdown); the future completes once its
    /// processes have been told to end (for screen, once the session was quit).
    @discardableResult
    func terminate() -> EventLoopFuture<Void>
    /// Ends the session at the agent's shutdown: its processes get SIGTERM, and SIGKILL once
    /// `grace` has passed; the future completes when they have gone or been killed.
    func shutdown(grace: TimeAmount) -> EventLoopFuture<Void>
}

extension ReconnectingSession {
    func shutdown(grace: TimeAmount) -> EventLoopFuture<Void> { terminate() }
}
