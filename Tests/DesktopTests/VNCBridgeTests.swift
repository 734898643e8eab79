import AgentTestSupport
import Foundation
import Testing

@testable import Desktop

/// The WebSocket ⇄ VNC bridge carrying a real RFB session, and its JSON refusals.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct VNCBridgeTests {
    /// Reads binary messages until `count` bytes are buffered (bounded).
    static func read(_ ws: inout TestWebSocket, into buffer: inout [UInt8], atLeast count: Int) async throws -> Bool {
        for _ in 0..<1000 where buffer.count < count {
            guard case .binary(let bytes)? = try await ws.next() else { return false }
            buffer += bytes
        }
        return buffer.count >= count
    }

    @Test func aViewerGetsTheBannerServerInitAndAFramebufferUpdate() async throws {
        try await DesktopHarness.with { desktop in
            try await TestWebSocket.withConnection(port: desktop.port, path: "/api/v0/desktop/vnc") { ws in
                var buffer: [UInt8] = []
                #expect(try await Self.read(&ws, into: &buffer, atLeast: 12))
                #expect(String(decoding: buffer.prefix(8), as: UTF8.self) == "RFB 003.")
                buffer.removeFirst(12)
                try await ws.send(opcode: 2, payload: Array("RFB 003.008\n".utf8))
                // Security types: a count, then the types; None (1) is offered.
                #expect(try await Self.read(&ws, into: &buffer, atLeast: 2))
                let count = Int(buffer[0])
                #expect(try await Self.read(&ws, into: &buffer, atLeast: 1 + count))
                #expect(buffer[1...count].contains(1))
                buffer.removeFirst(1 + count)
                try await ws.send(opcode: 2, payload: [1])
                #expect(try await Self.read(&ws, into: &buffer, atLeast: 4))
                #expect(buffer.prefix(4) == [0, 0, 0, 0], "SecurityResult OK")
                buffer.removeFirst(4)
                try await ws.send(opcode: 2, payload: [1])  // ClientInit: shared
                #expect(try await Self.read(&ws, into: &buffer, atLeast: 24))
                let width = Int(buffer[0]) << 8 | Int(buffer[1])
                let height = Int(buffer[2]) << 8 | Int(buffer[3])
                #expect(width == 1920 && height == 1080)
                let nameLength = Int(buffer[20]) << 24 | Int(buffer[21]) << 16 | Int(buffer[22]) << 8 | Int(buffer[23])
                #expect(try await Self.read(&ws, into: &buffer, atLeast: 24 + nameLength))
                buffer.removeFirst(24 + nameLength)
                // FramebufferUpdateRequest for a 16×16 corner, not incremental.
                try await ws.send(opcode: 2, payload: [3, 0, 0, 0, 0, 0, 0, 16, 0, 16])
                #expect(try await Self.read(&ws, into: &buffer, atLeast: 4))
                #expect(buffer[0] == 0, "a FramebufferUpdate")
                try await ws.close()
            }
            // Many viewers at once, each with its own connection.
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        try await TestWebSocket.withConnection(port: desktop.port, path: "/api/v0/desktop/vnc") { ws in
                            var buffer: [UInt8] = []
                            let ok = try await Self.read(&ws, into: &buffer, atLeast: 12)
                            try await ws.close()
                            return ok && buffer.starts(with: Array("RFB 003.".utf8))
                        }
                    }
                }
                for try await ok in group { #expect(ok) }
            }
        }
    }

    /// A desktop that cannot start is a JSON 500 before any upgrade.
    @Test func aDesktopThatCannotStartIsAJSONErrorNotAWebSocketClose() async throws {
        try await DesktopHarness.with(environment: ["PATH": "/nonexistent"]) { desktop in
            let response = try await desktop.client.request(
                "GET", "/api/v0/desktop/vnc",
                headers: [
                    ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Version", "13"),
                    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                ])
            #expect(response.status == 500)
            let body = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
            #expect(body?["message"] as? String == "Failed to start desktop session.")
            #expect((body?["detail"] as? String)?.contains("portabledesktop binary not found") == true)
            // The same for an action, before its body is even read.
            let action = try await desktop.action("not json")
            #expect(action.status == 500 && action.body["message"] as? String == "Failed to start desktop session.")
            // Recordings need portabledesktop.
            let recording = try await desktop.client.request(
                "POST", "/api/v0/desktop/recording/start", json: #"{"recording_id":"7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d"}"#)
            #expect(recording.status == 501)
        }
    }

    @Test func afterCloseTheBridgeRefusesWithJSON() async throws {
        try await DesktopHarness.with { desktop in
            await desktop.module.supervisor.close()
            do {
                try await TestWebSocket.withConnection(port: desktop.port, path: "/api/v0/desktop/vnc") { _ in }
                Issue.record("upgraded after close")
            } catch let refused as TestWebSocket.Refused {
                #expect(refused.status == 500)
            }
        }
    }
}
