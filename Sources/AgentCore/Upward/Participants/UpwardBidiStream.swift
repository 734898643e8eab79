/// A bidirectional upward stream: a sender of messages and the sequence of received ones.
/// The sending and the receiving side may be used from two tasks at once.
public struct UpwardBidiStream: Sendable {
    /// The sending side.
    public let sender: any UpwardStreamSender
    /// What the control plane sends, in order.
    public let messages: UpwardMessages

    /// A stream of these two sides (the session makes them; tests make fakes).
    public init(sender: any UpwardStreamSender, messages: UpwardMessages) {
        self.sender = sender
        self.messages = messages
    }

    /// Sends one message (a serialized protobuf); waits while the control plane's window is full.
    public func send(_ message: [UInt8]) async throws(UpwardStreamError) {
        try await sender.send(message)
    }

    /// Half-closes: the control plane reads the end; receiving goes on.
    public func closeSend() async throws(UpwardStreamError) {
        try await sender.closeSend()
    }

    /// Aborts both directions (the stream is reset).
    public func cancel() async {
        await sender.cancel()
    }
}

/// The sending side of an upward stream.
public protocol UpwardStreamSender: Sendable {
    /// Sends one message; throws ``UpwardStreamError/Kind/closed`` after `closeSend` or `cancel`.
    func send(_ message: [UInt8]) async throws(UpwardStreamError)
    /// Half-closes the stream (dRPC CloseSend).
    func closeSend() async throws(UpwardStreamError)
    /// Aborts the stream both ways.
    func cancel() async
}
