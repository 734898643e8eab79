import AgentHTTP
import AgentTestSupport
import Foundation
import Testing

/// How HTTP1ConnectionHandler serves a connection's requests from the pipeline:
/// pipelining, connection close, bodies it collects, streams or drops, and responses written
/// with back pressure. Real server, raw sockets.
@Suite(.timeLimit(.minutes(3)))
struct ResponderHandlerTests {
    /// A chunked request: `head` (ending in its blank line), then `chunks` chunks of 64 KiB
    /// of `byte`, then the last chunk.
    static func chunked(_ head: String, chunks: Int, of byte: UInt8) -> [UInt8] {
        var request = Array(head.utf8)
        let chunk = [UInt8](repeating: byte, count: 64 * 1024)
        for _ in 0..<chunks { request += Array("10000\r\n".utf8) + chunk + Array("\r\n".utf8) }
        return request + Array("0\r\n\r\n".utf8)
    }

    static func count(_ needle: String, in bytes: [UInt8]) -> Int {
        String(decoding: bytes, as: UTF8.self).components(separatedBy: needle).count - 1
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        try await withGuardServer { port, _ in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            // 40 requests in one write, bodies and all; the last asks to close.
            var batch = ""
            for n in 0..<40 {
                let body = #"{"command":"n\#(n)"}"#
                let close = n == 39 ? "Connection: close\r\n" : ""
                batch += "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\(close)Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
            }
            socket.send(batch)
            let (bytes, closed) = await socket.readAll(timeout: .seconds(20))
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(closed, "Connection: close is honoured after the last one")
            #expect(Self.count("HTTP/1.1 200 OK", in: bytes) == 40)
            let order = text.components(separatedBy: #""command":""#).dropFirst().map { $0.prefix { $0 != "\"" } }
            #expect(order == (0..<40).map { "n\($0)"[...] })
        }
    }

    /// Nothing after a request that asked to close is served (RFC 9112 §9.6), even when it
    /// came in the same write.
    @Test func nothingIsServedAfterAClose() async throws {
        try await withGuardServer { port, _ in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            let first = #"{"command":"first"}"#
            let second = #"{"command":"second"}"#
            socket.send(
                "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: \(first.utf8.count)\r\n\r\n\(first)"
                    + "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(second.utf8.count)\r\n\r\n\(second)")
            let (bytes, closed) = await socket.readAll(timeout: .seconds(10))
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(closed)
            #expect(text.contains(#""command":"first""#))
            #expect(!text.contains(#""command":"second""#), "the request behind the close is not run")
        }
    }

    /// A client whose chunked upload (asking to close) is too large for its route reads the
    /// 413, not a reset: the agent shuts its side and drops what is still arriving.
    @Test func aRefusedUploadIsAnsweredBeforeTheClose() async throws {
        try await withGuardServer { port, _ in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            let sender = Task {
                await onThread {
                    socket.send(
                        Self.chunked(
                            "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n", chunks: 24, of: 0x63))
                }
            }
            let (answer, closed) = await socket.readAll(timeout: .seconds(30))
            _ = await sender.value
            #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 413"), "\(String(decoding: answer.prefix(200), as: UTF8.self))")
            #expect(closed)
        }
    }

    /// A WebSocket handshake can only be a connection's first request; later it is sent to
    /// a new connection (307 to the same URI) and this one closes.
    @Test func aLateWebSocketHandshakeIsRedirected() async throws {
        try await withGuardServer { port, _ in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            socket.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(String(decoding: await socket.read(until: #""ok"}"#), as: UTF8.self).contains("200 OK"))
            socket.send(String.webSocketHandshake("/ws/late"))
            let (bytes, closed) = await socket.readAll(timeout: .seconds(10))
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 307"), "\(text.prefix(200))")
            #expect(text.contains("Location: /ws/late"))
            #expect(closed)
        }
    }

    /// A handler that reads its streamed body twice finds it empty the second time (the
    /// stream underneath would stop the process on a second iterator).
    @Test func aStreamedBodyReadTwiceIsEmptyTheSecondTime() async throws {
        try await withGuardServer { port, _ in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            socket.send("POST /count-twice HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            let text = String(decoding: await socket.read(until: "\"}"), as: UTF8.self)
            #expect(text.contains(#""first":"5""#) && text.contains(#""second":"0""#), "\(text)")
        }
    }

    /// A pipelined request that expects `100 Continue` behind a running one gets it after
    /// that response, never inside it.
    @Test func aPipelinedContinueWaitsForTheResponseBeforeIt() async throws {
        try await withGuardServer { port, _ in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            let body = #"{"command":"after"}"#
            socket.send(
                "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
                    + "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: \(body.utf8.count)\r\n\r\n")
            let first = String(decoding: await socket.read(until: "100 Continue\r\n\r\n", timeout: .seconds(20)), as: UTF8.self)
            #expect(first.hasPrefix("HTTP/1.1 200 OK"), "the slow response comes first, whole")
            let done = try #require(first.range(of: #""status":"done"}"#), "\(first)")
            let continued = try #require(first.range(of: "HTTP/1.1 100 Continue"))
            #expect(done.upperBound <= continued.lowerBound, "\(first)")
            socket.send(body)
            #expect(String(decoding: await socket.read(until: #""after"}"#), as: UTF8.self).contains("200 OK"))
        }
    }

    /// A client that pipelines without bound behind a slow request is cut off once 256
    /// request parts wait; the server goes on serving others.
    @Test func aPipelineFloodIsCutOff() async throws {
        try await withGuardServer { port, _ in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            socket.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n" + String(repeating: "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", count: 400))
            #expect(await socket.isClosedByPeer(within: .seconds(10)))
            let other = try #require(await LoopbackSocket.connect(port: port))
            other.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(String(decoding: await other.read(until: #""ok"}"#), as: UTF8.self).contains("200 OK"))
        }
    }

    /// A client that vanishes half-way through a body the responder collects leaves
    /// nothing behind: the connection closes and others are served.
    @Test func aClientVanishingInACollectedBodyLeavesNothingBehind() async throws {
        try await withGuardServer { port, registry in
            do {
                let socket = try #require(await LoopbackSocket.connect(port: port))
                socket.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"comm")
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(await eventually { registry.count == 0 }, "the connection is gone")
            let other = try #require(await LoopbackSocket.connect(port: port))
            other.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(String(decoding: await other.read(until: #""ok"}"#), as: UTF8.self).contains("200 OK"))
        }
    }

    /// Sends `GET /slow` (3 s) with `after` pipelined behind it in the same write, then
    /// `later` 300 ms on (when given); returns everything the server wrote before closing,
    /// whether it closed, and the range of the slow response's body (which comes first).
    static func behindSlow(
        port: Int, version: String = "1.1", _ after: String, later: String? = nil
    ) async throws -> (text: String, closed: Bool, done: Range<String.Index>) {
        let socket = try #require(await LoopbackSocket.connect(port: port))
        socket.send("GET /slow HTTP/\(version)\r\nHost: x\r\n\r\n" + after)
        if let later {
            try await Task.sleep(for: .milliseconds(300))
            socket.send(later)
        }
        let (bytes, closed) = await socket.readAll(timeout: .seconds(20))
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200 OK"), "\(text.prefix(200))")
        let done = try #require(text.range(of: #""status":"done"}"#), "\(text)")
        return (text, closed, done)
    }

    /// A request the guard refuses (here CONNECT: 405), pipelined behind a running one, is
    /// answered after that response, not ahead of it; then the connection closes.
    @Test func aPipelinedRefusalWaitsForTheResponseBeforeIt() async throws {
        try await withGuardServer { port, _ in
            let (text, closed, done) = try await Self.behindSlow(port: port, "CONNECT example.invalid:443 HTTP/1.1\r\nHost: x\r\n\r\n")
            let refused = try #require(text.range(of: "HTTP/1.1 405"), "\(text)")
            #expect(done.upperBound <= refused.lowerBound)
            #expect(closed)
        }
    }

    /// A pipelined request the decoder cannot parse gets its 400 after the response before
    /// it (it used to end the connection without a status line); then the connection
    /// closes. The client goes on sending: the decoder reports each later read as an
    /// error, which must not end the running response or lose the answer.
    @Test func aPipelinedParseErrorIsAnsweredAfterTheResponseBeforeIt() async throws {
        try await withGuardServer { port, _ in
            let (text, closed, done) = try await Self.behindSlow(
                port: port, "GET /healthz HTTP/1.1\r\nHost x\r\nbroken\r\n\r\n", later: "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            let refused = try #require(text.range(of: "HTTP/1.1 400 Bad Request"), "\(text)")
            #expect(done.upperBound <= refused.lowerBound)
            #expect(text.contains("Malformed HTTP request."))
            #expect(closed)
        }
    }

    /// An oversized header field pipelined behind a running request (in the same read)
    /// is answered 431, not 414: its request line could not be measured, and is short.
    @Test func aPipelinedOversizedFieldIsAnswered431() async throws {
        try await withGuardServer { port, _ in
            let big = String(repeating: "a", count: 20 * 1024)
            let (text, closed, _) = try await Self.behindSlow(port: port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: \(big)\r\n\r\n")
            #expect(text.contains("HTTP/1.1 431"), "\(text.suffix(300))")
            #expect(closed)
        }
    }

    /// Nothing follows a response that closes the connection (HTTP/1.0 here), not even the
    /// answer to a bad request pipelined behind it.
    @Test func nothingFollowsAClosingResponseNotEvenARefusal() async throws {
        try await withGuardServer { port, _ in
            let (text, closed, done) = try await Self.behindSlow(port: port, version: "1.0", "GET /healthz HTTP/1.1\r\nHost x\r\nbroken\r\n\r\n")
            #expect(done.upperBound == text.index(before: text.endIndex), "\(text)")
            #expect(closed)
        }
    }

    @Test func anHTTP10RequestClosesAfterItsResponse() async throws {
        try await withGuardServer { port, _ in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            socket.send("GET /healthz HTTP/1.0\r\n\r\n")
            let (bytes, closed) = await socket.readAll(timeout: .seconds(10))
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 200 OK"))
            #expect(text.lowercased().contains("connection: close"))
            #expect(closed)
        }
    }

    @Test func aClientThatHalfClosesStillGetsItsAnswer() async throws {
        try await withGuardServer { port, _ in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            let body = #"{"command":"late"}"#
            socket.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
            socket.shutdownWrite()
            let (bytes, closed) = await socket.readAll(timeout: .seconds(10))
            #expect(String(decoding: bytes, as: UTF8.self).contains(#""command":"late""#))
            #expect(closed, "then the connection ends")
        }
    }

    /// A handler that answers before reading its (streamed) body: the rest of the body is
    /// dropped as it arrives and the connection serves the next request.
    @Test func anEarlyAnswerDropsTheUnreadBodyAndKeepsTheConnection() async throws {
        try await withGuardServer { port, _ in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            let size = 300_000
            let head = "POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: \(size)\r\n\r\n"
            let sent = await onThread { socket.send(Array(head.utf8) + [UInt8](repeating: 0x61, count: size)) }
            #expect(sent)
            #expect(String(decoding: await socket.read(until: "}"), as: UTF8.self).hasPrefix("HTTP/1.1 403"))
            socket.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(String(decoding: await socket.read(until: #""ok"}"#), as: UTF8.self).contains("200 OK"))
        }
    }

    /// A streamed upload (chunked, 8 MiB) reaches its handler whole, read part by part while
    /// the socket is throttled by the handler's pace.
    @Test func aStreamedBodyArrivesWhole() async throws {
        try await withGuardServer { port, _ in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            // Built and sent on a thread of its own: megabytes of work in a debug build would
            // hold a cooperative thread (and stretch every other test's sleeps).
            let sent = await onThread {
                socket.send(Self.chunked("POST /count HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", chunks: 128, of: 0x62))
            }
            #expect(sent)
            // 90 s: 8 MiB through a debug build's parser on a loaded host has taken more
            // than the default 10 s.
            let text = String(decoding: await socket.read(until: "\"}", timeout: .seconds(90)), as: UTF8.self)
            #expect(text.contains(#""bytes":"8388608""#), "\(text.prefix(300))")
        }
    }

    /// A 32 MiB streamed response to a client that reads slowly through a small receive
    /// buffer arrives complete (the writer waits for the socket instead of queueing it).
    @Test func aLargeResponseToASlowReaderArrivesWhole() async throws {
        try await expectWholeResponseToASlowReader(size: 32 << 20, offLoop: false)
    }

    /// The same, written from the global executor: every write hops to the loop, and the
    /// writer waits there while the socket is full.
    @Test func aLargeResponseWrittenOffTheLoopToASlowReaderArrivesWhole() async throws {
        try await expectWholeResponseToASlowReader(size: 8 << 20, offLoop: true)
    }

    private func expectWholeResponseToASlowReader(size: Int, offLoop: Bool) async throws {
        try await withGuardServer { port, _ in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            socket.setReceiveBuffer(16 * 1024)
            socket.send("GET /big?size=\(size)&offLoop=\(offLoop ? 1 : 0) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            try await Task.sleep(for: .milliseconds(300))
            // Generous: each empty poll sleeps on the cooperative pool, which a loaded host
            // stretches; tens of megabytes take a thousand or more of them.
            let (bytes, closed) = await socket.readAll(timeout: .seconds(120))
            #expect(closed)
            // Chunked: the body bytes are the x's (counted on a thread of their own: megabytes
            // in a debug build would hold a cooperative thread).
            let received = bytes
            let xs = await onThread { () -> Int in
                let separator: [UInt8] = [13, 10, 13, 10]
                guard let bodyStart = received.firstRange(of: separator)?.upperBound else { return -1 }
                var count = 0
                for byte in received[bodyStart...] where byte == UInt8(ascii: "x") { count += 1 }
                return count
            }
            #expect(xs == size)
        }
    }
}
