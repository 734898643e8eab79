/// The messages one upward stream receives, in order: an async sequence of serialized
/// protobufs that ends at the control plane's CloseSend and throws when the stream fails
/// or the session drops. One reader: iterators made from the same value share the stream.
///
/// Reading is what lets the control plane send more (the stream's window is credited as
/// messages are taken), so a participant that stops reading holds a bounded amount
/// (``UpwardSession``). A receive that is waiting when its task is cancelled resets the
/// stream and throws ``UpwardStreamError/Kind/cancelled``.
public struct UpwardMessages: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    public typealias Failure = UpwardStreamError

    private let source: any UpwardMessageSource

    /// The messages `source` receives.
    public init(_ source: any UpwardMessageSource) {
        self.source = source
    }

    /// The next message, or nil once the control plane has closed its side.
    public func next() async throws(UpwardStreamError) -> [UInt8]? {
        try await source.receive()
    }

    /// An iterator over the stream (they all read the same stream).
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: source) }

    /// Takes the stream's messages one by one.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let source: any UpwardMessageSource

        /// The next message, or nil once the control plane has closed its side.
        public mutating func next() async throws(UpwardStreamError) -> [UInt8]? {
            try await source.receive()
        }

        /// The next message (the caller's isolation does not matter: the stream has its own).
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(UpwardStreamError) -> [UInt8]? {
            try await source.receive()
        }
    }
}

/// Where an ``UpwardMessages`` sequence takes its messages from (the control-plane
/// session's stream; a test's fake).
public protocol UpwardMessageSource: Sendable {
    /// The next message, or nil after the peer's CloseSend.
    func receive() async throws(UpwardStreamError) -> [UInt8]?
}
