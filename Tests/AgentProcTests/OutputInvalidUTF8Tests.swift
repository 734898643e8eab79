import AgentCore
import AgentProc
import AgentTestSupport
import Foundation
import Testing

/// Output that is not UTF-8 reads as the reference's JSON writes it (Go's encoder, on the
/// raw bytes of its buffer): one U+FFFD for each byte outside a well-formed sequence.
@Suite(.timeLimit(.minutes(2)))
struct OutputInvalidUTF8Tests {
    static let base = "/api/v0/processes"

    static func scalars(_ text: String?) -> [UInt32] { text?.unicodeScalars.map(\.value) ?? [] }

    @Test func snapshotCursorReadAndMatchReplaceEachInvalidByte() async throws {
        try await withProcessServer { h in
            // `a`, `E2 82` (a `€` cut short), `b`, `FF FE`, `c`, newline: octal, as every
            // `sh`'s printf reads it.
            let id = try await h.start(#"printf 'a\342\202b\377\376c\n'"#)
            let line = "a\u{FFFD}\u{FFFD}b\u{FFFD}\u{FFFD}c"
            let out = try await h.finalOutput(id)
            #expect(Self.scalars(out["output"] as? String) == Self.scalars(line + "\n"))
            let read = try await h.client.request("GET", "\(Self.base)/\(id)/output?offset=0")
            let cursor = try #require(jsonObject(read.body), "\(read)")
            #expect(Self.scalars(cursor["output"] as? String) == Self.scalars(line + "\n"))
            #expect(jsonInt(cursor["next_offset"]) == 8)
            let awaited = try await h.client.request("GET", "\(Self.base)/\(id)/output?until_literal=c&timeout=30s", timeout: .seconds(60))
            let match = try #require(jsonObject(awaited.body)?["match"] as? [String: Any], "\(awaited)")
            #expect(Self.scalars(match["line"] as? String) == Self.scalars(line))
        }
    }
}
