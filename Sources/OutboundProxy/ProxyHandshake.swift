/// A proxy's opening exchange on a new connection, sans-IO: the bytes to send once the
/// connection is up, then the proxy's bytes as they arrive, until the way to the target is
/// open or refused. ``ProxyHandshakeHandler`` runs one on a channel.
public protocol ProxyHandshake {
    /// The proxy this exchange is with.
    var proxy: ProxyServer { get }
    /// The bytes that open the exchange (sent when the connection is up).
    mutating func opening() -> [UInt8]
    /// Takes the proxy's next bytes (none, to continue after a ``ProxyHandshakeStep/send(_:)``:
    /// bytes the proxy sent ahead may already hold its next answer). Once the step is
    /// ``ProxyHandshakeStep/established(rest:)`` or ``ProxyHandshakeStep/failed(_:)``, no more
    /// are taken.
    mutating func feed(_ bytes: some Collection<UInt8>) -> ProxyHandshakeStep
    /// The error for a connection that wrote more than the handler holds before the way was
    /// open (`why` says so).
    func unanswered(_ why: String) -> ProxyError
}

/// What a ``ProxyHandshake`` asks for next.
public enum ProxyHandshakeStep: Sendable, Equatable {
    /// More of the proxy's bytes are needed.
    case incomplete
    /// Send these bytes, then feed again.
    case send([UInt8])
    /// The way to the target is open; `rest` are bytes after the proxy's answer (the
    /// target's, already).
    case established(rest: [UInt8])
    /// The proxy refused, or broke its protocol.
    case failed(ProxyError)
}
