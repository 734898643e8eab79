import AgentHTTP
import AgentTestSupport
import Foundation
import Testing

/// Request bodies whose framing is broken are the client's mistake: 400 (501 for a transfer
/// coding the agent does not know), never 500, and the connection closes (what follows the
/// broken framing cannot be told apart from the body).
@Suite(.timeLimit(.minutes(2)))
struct MalformedBodyTests {
    /// Sends `request` on a new connection; the status, the whole answer, and whether the
    /// server closed the connection afterwards.
    static func send(_ request: String, port: Int) async throws -> (status: Int?, text: String, closed: Bool) {
        let socket = try #require(await LoopbackSocket.connect(port: port))
        socket.send(request)
        let (bytes, closed) = await socket.readAll(timeout: .seconds(20))
        return (String.httpStatus(of: bytes), String(decoding: bytes, as: UTF8.self), closed)
    }

    static let head = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    static let closing = "Connection: close\r\n"

    @Test func aChunkSizeOfEighteenHexDigits() async throws {
        try await withGuardServer { port, _ in
            let answer = try await Self.send(Self.head + "Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\n{}\r\n0\r\n\r\n", port: port)
            #expect(answer.status == 400, "\(answer.text)")
            #expect(answer.text.contains("Malformed"), "\(answer.text)")
            #expect(answer.closed)
        }
    }

    @Test func aHundredKilobyteChunkExtension() async throws {
        try await withGuardServer { port, _ in
            let extensionText = String(repeating: "a", count: 100_000)
            let answer = try await Self.send(Self.head + "Transfer-Encoding: chunked\r\n\r\n2;\(extensionText)\r\n{}\r\n0\r\n\r\n", port: port)
            #expect(answer.status == 400, "\(answer.text)")
            #expect(answer.text.contains("chunk framing"), "\(answer.text)")
            #expect(answer.closed)
        }
    }

    /// Many tiny chunks are legal framing, and a large chunked upload with short extensions
    /// streams through whole.
    @Test func tinyChunksAndLargeChunkedUploadsPass() async throws {
        try await withGuardServer { port, _ in
            let body = #"{"command":"tiny"}"#.map { "1\r\n\($0)\r\n" }.joined()
            let tiny = try await RawHTTPClient(port: port).raw(Array((Self.head + Self.closing + "Transfer-Encoding: chunked\r\n\r\n" + body + "0\r\n\r\n").utf8))
            #expect(tiny.status == 200)
            #expect(tiny.bodyText.contains("tiny"))
            let chunk = String(repeating: "y", count: 65536)
            let chunks = (0..<64).map { "10000;n=\($0)\r\n\(chunk)\r\n" }.joined()
            let upload = try await RawHTTPClient(port: port).raw(
                Array(("POST /count HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + "0\r\n\r\n").utf8))
            #expect(upload.status == 200)
            #expect(upload.bodyText.contains("\(64 * 65536)"), "\(upload.bodyText)")
        }
    }

    @Test func anUnknownTransferCoding() async throws {
        try await withGuardServer { port, _ in
            let answer = try await Self.send(Self.head + "Transfer-Encoding: xchunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", port: port)
            #expect(answer.status == 501, "\(answer.text)")
            #expect(answer.text.contains("Transfer coding not supported."), "\(answer.text)")
            #expect(answer.closed)
        }
    }

    /// A broken chunk behind a request that was fine: the first is answered, the broken
    /// one gets 400, and the connection closes.
    @Test func aBrokenChunkAfterAGoodRequest() async throws {
        try await withGuardServer { port, _ in
            let good = Self.head + "Content-Length: 15\r\n\r\n{\"command\":\"a\"}"
            let bad = Self.head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
            let answer = try await Self.send(good + bad, port: port)
            #expect(answer.status == 200, "\(answer.text)")
            #expect(answer.text.contains("HTTP/1.1 400"), "\(answer.text)")
            #expect(!answer.text.contains("HTTP/1.1 500"), "\(answer.text)")
            #expect(answer.closed)
        }
    }

    /// A body cut short by the client's half-close: 400 `Request body incomplete.`, for a
    /// collected body (whose handler never runs) as for a streamed one. Before, a collected
    /// body's connection closed with no answer.
    @Test func aBodyCutByAHalfCloseIsAnswered() async throws {
        try await withGuardServer { port, _ in
            for framing in ["Content-Length: 56\r\n\r\n{\"command\":", "Transfer-Encoding: chunked\r\n\r\n20\r\n{\"command\":"] {
                let socket = try #require(await LoopbackSocket.connect(port: port))
                socket.send(Self.head + framing)
                socket.shutdownWrite()
                let (bytes, closed) = await socket.readAll(timeout: .seconds(20))
                let text = String(decoding: bytes, as: UTF8.self)
                #expect(String.httpStatus(of: bytes) == 400, "\(framing): \(text)")
                #expect(text.contains("Request body incomplete."), "\(framing): \(text)")
                #expect(closed)
            }
        }
    }
}
