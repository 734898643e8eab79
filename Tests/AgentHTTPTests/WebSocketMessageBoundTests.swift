import AgentHTTP
import AgentTestSupport
import Foundation
import Testing

/// Every WebSocket route's inbound messages are bounded (bytes and fragments) and checked
/// (a continuation needs a message to continue, text is UTF-8), whatever its handler does
/// with them: a flood of 1-byte fragments once grew the agent by hundreds of MiB.
@Suite(.timeLimit(.minutes(3)))
struct WebSocketMessageBoundTests {
    static let text: UInt8 = 0x1
    static let binary: UInt8 = 0x2
    static let continuation: UInt8 = 0x0

    /// Connects to `path`, reads the greeting, runs `body`, then reads until the server's
    /// close frame; its code (nil: none came) and the messages that came before it.
    static func session(
        port: Int, path: String, _ body: (inout TestWebSocket) async throws -> Void
    ) async throws -> (code: Int?, messages: [TestWebSocket.Message]) {
        try await TestWebSocket.withConnection(port: port, path: path) { ws in
            #expect(try await ws.next() == .text("hello"))
            try await body(&ws)
            var messages: [TestWebSocket.Message] = []
            for _ in 0..<10_000 {
                guard let message = try await ws.next() else { break }
                messages.append(message)
            }
            return (ws.closeCode, messages)
        }
    }

    /// A message of 1-byte fragments, sent in batches until the server closes it with 1009
    /// once the fragment cap is passed (bounded: a few batches past the cap).
    @Test(arguments: ["/ws/one", "/messages"])
    func aFloodOfOneByteFragmentsIsClosedWith1009(path: String) async throws {
        try await withGuardServer { port, _ in
            let batch = 1024
            let batches = WebSocketLimits.maxMessageFragments / batch + 4
            let outcome = try await Self.session(port: port, path: path) { ws in
                try await ws.send(raw: TestWebSocket.maskedFrame(fin: false, opcode: Self.text, payload: [0x61]))
                let fragments = (0..<batch).flatMap { _ in TestWebSocket.maskedFrame(fin: false, opcode: Self.continuation, payload: [0x61]) }
                for _ in 0..<batches {
                    // Writes fail once the server has closed: that is the point.
                    do { try await ws.send(raw: fragments) } catch { break }
                }
            }
            #expect(outcome.code == 1009, "\(outcome)")
            #expect(outcome.messages.isEmpty)
        }
    }

    /// One message of more bytes than the cap, in fragments under the frame limit.
    @Test func aMessageOverTheByteCapIsClosedWith1009() async throws {
        try await withGuardServer { port, _ in
            let piece = [UInt8](repeating: 0x62, count: 512 * 1024)
            let pieces = WebSocketLimits.maxMessageBytes / piece.count + 2
            let outcome = try await Self.session(port: port, path: "/messages") { ws in
                for index in 0..<pieces {
                    let frame = TestWebSocket.maskedFrame(fin: false, opcode: index == 0 ? Self.binary : Self.continuation, payload: piece)
                    do { try await ws.send(raw: frame) } catch { break }
                }
            }
            #expect(outcome.code == 1009, "\(outcome)")
        }
    }

    /// Fragmented messages within the caps arrive whole, text split inside a character too.
    @Test func fragmentedMessagesWithinTheCapsPass() async throws {
        try await withGuardServer { port, _ in
            try await TestWebSocket.withConnection(port: port, path: "/messages") { ws in
                #expect(try await ws.next() == .text("hello"))
                let euro = Array("€".utf8)  // three bytes, split across two fragments
                try await ws.send(
                    raw:
                        TestWebSocket.maskedFrame(fin: false, opcode: Self.text, payload: [0x61, euro[0]])
                        + TestWebSocket.maskedFrame(fin: true, opcode: 0x9, payload: [1])  // a ping between fragments
                        + TestWebSocket.maskedFrame(fin: true, opcode: Self.continuation, payload: [euro[1], euro[2]]))
                let first = try await ws.next()
                #expect(first == .text("text 4"), "\(String(describing: first)) \(String(describing: ws.closeCode)) \(String(describing: ws.closeReason))")
                let fragments = (0..<100).flatMap { index in
                    TestWebSocket.maskedFrame(fin: index == 99, opcode: index == 0 ? Self.binary : Self.continuation, payload: [UInt8](repeating: 7, count: 1000))
                }
                try await ws.send(raw: fragments)
                #expect(try await ws.next() == .text("binary 100000"))
                try await ws.close()
            }
        }
    }

    @Test(arguments: ["/ws/one", "/messages"])
    func aContinuationWithoutAStartIsClosedWith1002(path: String) async throws {
        try await withGuardServer { port, _ in
            let outcome = try await Self.session(port: port, path: path) { ws in
                try await ws.send(raw: TestWebSocket.maskedFrame(fin: true, opcode: Self.continuation, payload: [0x61]))
            }
            #expect(outcome.code == 1002, "\(outcome)")
        }
    }

    /// A new message while a fragmented one is unfinished.
    @Test func aNewMessageInsideAFragmentedOneIsClosedWith1002() async throws {
        try await withGuardServer { port, _ in
            let outcome = try await Self.session(port: port, path: "/ws/one") { ws in
                try await ws.send(
                    raw: TestWebSocket.maskedFrame(fin: false, opcode: Self.text, payload: [0x61])
                        + TestWebSocket.maskedFrame(fin: true, opcode: Self.binary, payload: [0x62]))
            }
            #expect(outcome.code == 1002, "\(outcome)")
        }
    }

    @Test(arguments: ["/ws/one", "/messages"])
    func invalidUTF8TextIsClosedWith1007(path: String) async throws {
        try await withGuardServer { port, _ in
            let outcome = try await Self.session(port: port, path: path) { ws in
                try await ws.send(raw: TestWebSocket.maskedFrame(fin: true, opcode: Self.text, payload: [0x61, 0xC3, 0x28]))
            }
            #expect(outcome.code == 1007, "\(outcome)")
        }
    }

    /// A text message that ends inside a character.
    @Test func textEndingInsideACharacterIsClosedWith1007() async throws {
        try await withGuardServer { port, _ in
            let outcome = try await Self.session(port: port, path: "/ws/one") { ws in
                try await ws.send(
                    raw: TestWebSocket.maskedFrame(fin: false, opcode: Self.text, payload: [0x61, 0xE2])
                        + TestWebSocket.maskedFrame(fin: true, opcode: Self.continuation, payload: [0x82]))
            }
            #expect(outcome.code == 1007, "\(outcome)")
        }
    }
}
