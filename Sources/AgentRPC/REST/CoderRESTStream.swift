import AsyncHTTPClient
import NIOCore
import OutboundProxy

/// A streamed answer's body from ``CoderRESTClient/stream(_:query:connectTimeout:_:)``, chunk
/// by chunk as it arrives, whichever way the request travelled; iterate it once.
public struct CoderRESTStream: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer

    enum Source: Sendable {
        case client(HTTPClientResponse.Body)
        case checked(CheckedHTTPSClient.Body)
    }
    private let source: Source

    init(_ source: Source) {
        self.source = source
    }

    public func makeAsyncIterator() -> AsyncIterator {
        switch source {
        case .client(let body): AsyncIterator(.client(body.makeAsyncIterator()))
        case .checked(let body): AsyncIterator(.checked(body.makeAsyncIterator()))
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        enum Inner {
            case client(HTTPClientResponse.Body.AsyncIterator)
            case checked(CheckedHTTPSClient.Body.AsyncIterator)
        }
        private var inner: Inner

        init(_ inner: Inner) {
            self.inner = inner
        }

        public mutating func next() async throws -> ByteBuffer? {
            switch inner {
            case .client(var iterator):
                let chunk = try await iterator.next()
                inner = .client(iterator)
                return chunk
            case .checked(var iterator):
                let chunk = try await iterator.next()
                inner = .checked(iterator)
                return chunk
            }
        }
    }
}
