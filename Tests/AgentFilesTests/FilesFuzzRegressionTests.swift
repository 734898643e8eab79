import AgentCore
import AgentFiles
import AgentHTTP
import Testing

/// Inputs the `FuzzFileRequests` libFuzzer target reported, replayed through the entry it
/// calls (``FilesFuzzing``) with its invariants. The bytes are split as the target splits
/// them (`Fuzz/Targets/Cases/FuzzFileRequests.swift`, `FuzzInput`): the first byte modulo 5 picks the
/// decoder (0: read-file-lines), then a 2-byte little-endian length modulo 301 takes the
/// query, and the rest is the file's content. The same bytes are seeds in
/// `Fuzz/Seeds/FuzzFileRequests/`.
struct FilesFuzzRegressionTests {
    static let findings: [(name: String, bytes: [UInt8])] = [
        ("crash-a8615f09ca8e553691dc03eedeb8f0e01c116659", [0x00, 0x31, 0x00] + Array("path=/max_rksponse_lines=2x\n}\n".utf8)),
        ("crash-ebb7627f4029f04292c3f74361f2455322c68c8b", [0xFF, 0xFF, 0x01, 0x70, 0x61, 0x74, 0x68, 0x3D, 0x2F, 0xA0] + Array("dc/`fset=3&limit=10".utf8)),
    ]

    /// The target's split of a read-file-lines case: the query and the content.
    static func readFileLinesCase(_ bytes: [UInt8]) -> (query: String, content: [UInt8]) {
        #expect(bytes[0] % 5 == 0, "a read-file-lines case")
        let length = (Int(bytes[1]) | Int(bytes[2]) << 8) % 301
        let query = Array(bytes[3...].prefix(length))
        return (String(decoding: query, as: UTF8.self), Array(bytes[(3 + query.count)...]))
    }

    /// Each finding answers (a 400 or a window) without trapping, and a window holds the
    /// target's invariants: an empty file is `{"success":true}` alone (`total_lines` 0, as
    /// the reference answers, not the 1 line a split on `\n` would count: both findings are
    /// empty files with valid queries), a failure carries its error and nothing else, a
    /// success counts the content's lines.
    @Test(arguments: findings.map(\.bytes))
    func fuzzFindingsHoldTheTargetsInvariants(bytes: [UInt8]) {
        let (query, content) = Self.readFileLinesCase(bytes)
        let answer:
            (
                window: (offset: Int, limit: Int, maxLineBytes: Int, maxResponseLines: Int, maxResponseBytes: Int),
                success: Bool, fileSize: Int, totalLines: Int, linesRead: Int, content: String, error: String
            )
        do throws(APIError) { answer = try FilesFuzzing.readFileLines(query: query, content: content) } catch {
            #expect(error.statusCode == 400, "a query refused with \(error)")
            return
        }
        #expect(answer.window.offset >= 1)
        if content.isEmpty {
            #expect(answer.success && answer.fileSize == 0 && answer.totalLines == 0 && answer.linesRead == 0 && answer.content.isEmpty)
        } else if !answer.success {
            #expect(!answer.error.isEmpty && answer.linesRead == 0 && answer.content.isEmpty)
        } else {
            #expect(answer.fileSize == content.count)
            #expect(answer.totalLines == content.reduce(1) { $1 == 0x0A ? $0 + 1 : $0 })
        }
    }
}
