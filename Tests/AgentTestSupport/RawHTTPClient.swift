import NIOCore
import NIOPosix
import Foundation

/// A deliberately small HTTP/1.1 client over a real loopback TCP socket.
///
/// It sends bytes exactly as given (so tests can send malformed, truncated or oversized
/// requests) and reads the response until the server closes (`Connection: close`).
/// Every read is bounded by `timeout`.
public struct RawHTTPClient: Sendable {
    public let host: String
    public let port: Int

    public init(host: String = "127.0.0.1", port: Int) {
        self.host = host
        self.port = port
    }

    public struct Response: Sendable, CustomStringConvertible {
        public var status: Int
        public var headers: [(String, String)]
        public var body: [UInt8]

        public var bodyText: String { String(decoding: body, as: UTF8.self) }

        public func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }

        public var description: String { "\(status) \(bodyText)" }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Sends a well-formed request with `Connection: close` and returns the response.
    public func request(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
        timeout: Duration = .seconds(60)
    ) async throws -> Response {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if let body { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        return try await raw(Array(text.utf8) + (body ?? []), timeout: timeout)
    }

    /// JSON convenience.
    public func request(_ method: String, _ path: String, headers: [(String, String)] = [], json: String) async throws -> Response {
        try await request(method, path, headers: headers + [("Content-Type", "application/json")], body: Array(json.utf8))
    }

    /// Sends `bytes` and reads until the server closes or `timeout` passes.
    public func raw(_ bytes: [UInt8], timeout: Duration = .seconds(60)) async throws -> Response {
        let received = try await exchange(bytes, closeAfter: nil, timeout: timeout)
        return try Self.parse(received)
    }

    /// Sends `bytes`, then closes the connection after `closeAfter` without reading a response:
    /// a client that vanishes mid-request.
    public func sendAndVanish(_ bytes: [UInt8], after delay: Duration) async throws {
        _ = try await exchange(bytes, closeAfter: delay, timeout: delay + .seconds(5))
    }

    /// Sends a well-formed request with `Connection: close` over a connected socket it takes
    /// ownership of (one end of a socketpair whose other end was handed to the server), and
    /// returns the response.
    public static func request(
        over descriptor: Int32, _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
        timeout: Duration = .seconds(60)
    ) async throws -> Response {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if let body { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        let exchange = Exchange(bytes: Array(text.utf8) + (body ?? []), closeAfter: nil, timeout: timeout)
        _ = try await ClientBootstrap(group: exchange.loop)
            .channelInitializer { channel in channel.pipeline.addHandler(exchange) }
            .withConnectedSocket(descriptor).get()
        return try parse(try await exchange.received.futureResult.get())
    }

    private func exchange(_ bytes: [UInt8], closeAfter: Duration?, timeout: Duration) async throws -> [UInt8] {
        let exchange = Exchange(bytes: bytes, closeAfter: closeAfter, timeout: timeout)
        _ = try await ClientBootstrap(group: exchange.loop)
            .channelInitializer { channel in channel.pipeline.addHandler(exchange) }
            .connect(host: host, port: port).get()
        return try await exchange.received.futureResult.get()
    }

    /// One request and its response, entirely on the channel's event loop: the request is
    /// written as soon as the connection opens and the response gathered as it arrives, so a
    /// test task that waits long for a cooperative thread never makes a server's deadline
    /// pass between connecting and sending.
    final class Exchange: ChannelInboundHandler, @unchecked Sendable {
        // @unchecked: every stored property is touched on the channel's event loop only
        // (handler callbacks and tasks scheduled on that loop); `received` is a promise,
        // itself thread-safe.
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private let bytes: [UInt8]
        private let closeAfter: Duration?
        private let timeout: Duration
        private var gathered: [UInt8] = []
        private var promise: EventLoopPromise<[UInt8]>?
        private var deadline: Scheduled<Void>?
        private var started = false
        /// The loop the connection is made on (its handler runs there).
        let loop: any EventLoop
        /// Completed with the bytes received once the server closes (or with a failure).
        let received: EventLoopPromise<[UInt8]>

        init(bytes: [UInt8], closeAfter: Duration?, timeout: Duration) {
            self.bytes = bytes
            self.closeAfter = closeAfter
            self.timeout = timeout
            loop = MultiThreadedEventLoopGroup.singleton.next()
            received = loop.makePromise(of: [UInt8].self)
            promise = received
        }

        func handlerAdded(context: ChannelHandlerContext) {
            if context.channel.isActive { start(context) }
        }

        func channelActive(context: ChannelHandlerContext) {
            start(context)
            context.fireChannelActive()
        }

        private func start(_ context: ChannelHandlerContext) {
            guard !started else { return }
            started = true
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: bytes)), promise: nil)
            let channel = context.channel
            if let closeAfter {
                deadline = context.eventLoop.scheduleTask(in: .nanoseconds(Int64(closeAfter / .nanoseconds(1)))) {
                    self.finish(.success([]))
                    channel.close(promise: nil)
                }
                return
            }
            deadline = context.eventLoop.scheduleTask(in: .nanoseconds(Int64(timeout / .nanoseconds(1)))) {
                self.finish(.failure(Failure(description: "no complete response within \(self.timeout)")))
                channel.close(promise: nil)
            }
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            gathered += unwrapInboundIn(data).readableBytesView
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            // A reset after a complete response still counts as that response.
            if gathered.isEmpty { finish(.failure(error)) } else { finish(.success(gathered)) }
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            finish(.success(gathered))
            context.fireChannelInactive()
        }

        /// A channel that never became active (the connect failed: nothing listens, or the
        /// server just died) gets no `channelInactive`: its promise is failed here, never
        /// left to be dropped uncompleted (NIO's debug builds trap on that).
        func handlerRemoved(context: ChannelHandlerContext) {
            finish(.failure(Failure(description: "the connection closed before it was ever open")))
        }

        private func finish(_ result: Result<[UInt8], any Error>) {
            guard let promise else { return }
            self.promise = nil
            deadline?.cancel()
            deadline = nil
            promise.completeWith(result)
        }
    }

    static func parse(_ bytes: [UInt8]) throws -> Response {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = bytes.firstRange(of: separator) else {
            throw Failure(description: "no HTTP header in \(bytes.count) bytes: \(String(decoding: bytes.prefix(200), as: UTF8.self))")
        }
        let head = String(decoding: bytes[..<end.lowerBound], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw Failure(description: "bad status line: \(head)")
        }
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var body = Array(bytes[end.upperBound...])
        if headers.contains(where: { $0.0.lowercased() == "transfer-encoding" && $0.1.lowercased() == "chunked" }) {
            body = try dechunk(body)
        }
        return Response(status: status, headers: headers, body: body)
    }

    static func dechunk(_ bytes: [UInt8]) throws -> [UInt8] {
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            guard let lineEnd = bytes[index...].firstRange(of: Array("\r\n".utf8)) else { break }
            let sizeText = String(decoding: bytes[index..<lineEnd.lowerBound], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16) else {
                throw Failure(description: "bad chunk size \(sizeText)")
            }
            if size == 0 { break }
            let start = lineEnd.upperBound
            out += bytes[start..<min(bytes.count, start + size)]
            index = start + size + 2
        }
        return out
    }
}
