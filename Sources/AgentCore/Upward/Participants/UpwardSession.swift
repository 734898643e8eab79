/// One connected session with the control plane, as an ``UpwardParticipant`` sees it: the
/// way to open dRPC calls on it, each named by its full RPC name
/// (`/coder.tailnet.v2.Tailnet/Coordinate`) and carrying serialized protobufs as bytes.
///
/// Valid while the participant's `run` lasts: once the session has dropped, every call and
/// every stream throws ``UpwardStreamError/Kind/sessionEnded``.
///
/// Memory: each stream holds at most the yamux receive window of unread bytes
/// (``UpwardStreamLimits/receiveWindowBytes``: the control plane waits for credit, so a
/// participant that reads slowly slows its sender and nothing else), plus one message being
/// assembled of at most the stream's `maxMessageBytes`; a larger message fails the stream
/// (``UpwardStreamError/Kind/messageTooLarge``). At most ``UpwardStreamLimits/maxStreams``
/// streams are open per participant and session.
public protocol UpwardSession: Sendable {
    /// The agent's connected sessions counted from 1: a participant can tell a new session.
    var number: Int { get }

    /// The Agent API version the control plane accepted for this session (by default
    /// ``AgentAPIVersion/current``).
    var apiVersion: AgentAPIVersion { get }

    /// A unary call: the request, then the one response.
    func unary(_ rpc: String, request: [UInt8], maxMessageBytes: Int) async throws(UpwardStreamError) -> [UInt8]

    /// A server-streaming call: the request is sent (with the sender's CloseSend), then the
    /// messages arrive in order; the sequence ends at the control plane's CloseSend.
    func serverStream(_ rpc: String, request: [UInt8], maxMessageBytes: Int) async throws(UpwardStreamError) -> UpwardMessages

    /// A bidirectional stream (also client-streaming: send, `closeSend()`, then read the reply).
    /// The call's Invoke leaves with the first message (or the CloseSend), as the reference
    /// client sends it.
    func bidiStream(_ rpc: String, maxMessageBytes: Int) async throws(UpwardStreamError) -> UpwardBidiStream
}

extension UpwardSession {
    public var apiVersion: AgentAPIVersion { .current }

    /// A unary call whose response may be up to ``UpwardStreamLimits/maxMessageBytes``.
    public func unary(_ rpc: String, request: [UInt8]) async throws(UpwardStreamError) -> [UInt8] {
        try await unary(rpc, request: request, maxMessageBytes: UpwardStreamLimits.maxMessageBytes)
    }

    /// A server stream whose messages may be up to ``UpwardStreamLimits/maxMessageBytes``.
    public func serverStream(_ rpc: String, request: [UInt8]) async throws(UpwardStreamError) -> UpwardMessages {
        try await serverStream(rpc, request: request, maxMessageBytes: UpwardStreamLimits.maxMessageBytes)
    }

    /// A bidirectional stream whose received messages may be up to ``UpwardStreamLimits/maxMessageBytes``.
    public func bidiStream(_ rpc: String) async throws(UpwardStreamError) -> UpwardBidiStream {
        try await bidiStream(rpc, maxMessageBytes: UpwardStreamLimits.maxMessageBytes)
    }
}

/// The bounds of participants' streams (see ``UpwardSession``).
public enum UpwardStreamLimits {
    /// Largest message a stream accepts by default: dRPC's own limit (4 MiB).
    public static let maxMessageBytes = 4 << 20
    /// Unread bytes a stream holds at most before the control plane must wait: the yamux
    /// stream window (256 KiB).
    public static let receiveWindowBytes = 256 << 10
    /// Streams one participant may have open on one session at once.
    public static let maxStreams = 64
}
