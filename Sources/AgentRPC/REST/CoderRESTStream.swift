import NIOCore
import OutboundProxy

/// A streamed answer's body from ``CoderRESTClient/stream(_:query:connectTimeout:_:)``, chunk
/// by chunk as it arrives; iterate it once.
public struct CoderRESTStream: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer
    private let body: CheckedHTTPClient.Body

    init(_ body: CheckedHTTPClient.Body) {
        self.body = body
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(inner: body.makeAsyncIterator()) }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var inner: CheckedHTTPClient.Body.AsyncIterator

        public mutating func next() async throws -> ByteBuffer? { try await inner.next() }
    }
}
