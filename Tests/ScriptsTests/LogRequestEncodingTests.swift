import AgentProto
import Foundation
import SwiftProtobuf
import Testing

@testable import Scripts

/// The uploader's hand-made BatchCreateLogsRequest decodes, with SwiftProtobuf, to exactly
/// the lines it was made from.
struct LogRequestEncodingTests {
    @Test func requestDecodesToTheLines() throws {
        let source: [UInt8] = (0..<16).map { UInt8($0 * 7 + 1) }
        let lines: [(String, UInt8, Int64)] = [
            ("plain", LogRecord.levelInfo, 1_700_000_000_123_456_789),
            ("", LogRecord.levelError, 1_700_000_001_000_000_000),
            ("ünïcødé ❌ \u{1F600}", LogRecord.levelWarn, 5),
            (String(repeating: "x", count: 300), LogRecord.levelInfo, 0),
        ]
        let records = lines.map { text, level, time in
            Array(text.utf8).withUnsafeBytes { LogRecord.encode(sourceID: source, level: level, createdAt: time, sanitizing: $0) }
        }
        let bytes = LogRequestEncoding.request(records[...])
        let request = try Coder_Agent_V2_BatchCreateLogsRequest(serializedBytes: bytes)
        #expect(Array(request.logSourceID) == source)
        #expect(request.logs.map(\.output) == lines.map(\.0))
        #expect(request.logs.map { UInt8($0.level.rawValue) } == lines.map(\.1))
        #expect(request.logs.map { Int64($0.createdAt.seconds) * 1_000_000_000 + Int64($0.createdAt.nanos) } == lines.map(\.2))
        // The same request built the ordinary way decodes equal.
        var expected = Coder_Agent_V2_BatchCreateLogsRequest()
        expected.logSourceID = Data(source)
        expected.logs = lines.map { text, level, time in
            var log = Coder_Agent_V2_Log()
            log.createdAt = Google_Protobuf_Timestamp(seconds: time / 1_000_000_000, nanos: Int32(time % 1_000_000_000))
            log.output = text
            log.level = Coder_Agent_V2_Log.Level(rawValue: Int(level))!
            return log
        }
        #expect(request == expected)
    }

    /// A journal's record may hold any time (the journal is read back from disk): the ends
    /// of Int64 encode as the timestamp they are, never trap.
    @Test func extremeTimesEncode() throws {
        let source = [UInt8](repeating: 3, count: 16)
        let times: [Int64] = [.min, .min + 1, -1, .max]
        let records = times.map { time in
            Array("x".utf8).withUnsafeBytes { LogRecord.encode(sourceID: source, level: LogRecord.levelInfo, createdAt: time, sanitizing: $0) }
        }
        let request = try Coder_Agent_V2_BatchCreateLogsRequest(serializedBytes: LogRequestEncoding.request(records[...]))
        let decoded = request.logs.map { ($0.createdAt.seconds, $0.createdAt.nanos) }
        let expected = times.map { time -> (Int64, Int32) in
            let (q, r) = time.quotientAndRemainder(dividingBy: 1_000_000_000)
            return r < 0 ? (q - 1, Int32(r + 1_000_000_000)) : (q, Int32(r))
        }
        #expect(decoded.map(\.0) == expected.map(\.0) && decoded.map(\.1) == expected.map(\.1))
    }

    @Test func dirtyLinesAreSanitisedAndFieldsReadInPlace() throws {
        let source = [UInt8](repeating: 9, count: 16)
        let record = ([0x61, 0xFF, 0x00, 0x62] as [UInt8]).withUnsafeBytes {
            LogRecord.encode(sourceID: source, level: LogRecord.levelInfo, createdAt: 42, sanitizing: $0)
        }
        #expect(try LogRecord(decoding: record).output == "a❌❌b")
        let fields = try #require(LogRequestEncoding.fields(record))
        #expect(fields.createdAt == 42 && fields.level == LogRecord.levelInfo && fields.outputCount == "a❌❌b".utf8.count)
        #expect(LogRequestEncoding.fields([2, 3]) == nil)
        var other = record
        other[12] ^= 1
        #expect(LogRequestEncoding.sameSource(record, record) && !LogRequestEncoding.sameSource(record, other))
    }
}
