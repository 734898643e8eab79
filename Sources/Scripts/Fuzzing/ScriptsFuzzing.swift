/// The scripts module's decoders of bytes it reads, for the fuzz targets (`Fuzz/`,
/// `make fuzz`): a script's output cut into lines (``LogLineSplitter``) and sanitised
/// (``LogSanitizer``), the journal's records (``LogRecord``) and the journal itself
/// (``UploadJournal``) recovering from whatever files it finds. Those types are internal
/// and the fuzz package cannot `@testable import` a release build, so these thin wrappers
/// run the agent's own code and hand the results out; the checks are the target's. It
/// exists for the fuzz targets only; the cron parser is public (``CronSchedule``).
public enum ScriptsFuzzing {
    /// What a line cut at its bound ends with.
    public static var truncationSuffix: [UInt8] { LogLineSplitter.truncationSuffix }

    /// Feeds `chunks` in turn to one splitter of `maxLineBytes` (nil: the agent's default),
    /// then ends the stream, as a script's output is read. Returns every line (copied), whether
    /// it was cut, the splitter's count of cut lines and its effective bound.
    public static func splitLines(
        _ chunks: [[UInt8]], maxLineBytes: Int?
    ) -> (
        lines: [(bytes: [UInt8], truncated: Bool)], truncatedLines: Int, maxLineBytes: Int
    ) {
        var splitter = maxLineBytes.map { LogLineSplitter(maxLineBytes: $0) } ?? LogLineSplitter()
        var lines: [(bytes: [UInt8], truncated: Bool)] = []
        for chunk in chunks {
            splitter.feed(chunk) { lines.append(([UInt8]($0.bytes), $0.truncated)) }
        }
        splitter.finish { lines.append(([UInt8]($0.bytes), $0.truncated)) }
        return (lines, splitter.truncatedLines, splitter.maxLineBytes)
    }

    /// A line as it is sent to the control plane.
    public static func sanitize(_ bytes: [UInt8]) -> String {
        LogSanitizer.sanitize(bytes)
    }

    /// A journal record's fields, or nil when the bytes are not one.
    public static func decodeLogRecord(_ bytes: [UInt8]) -> (sourceID: [UInt8], level: UInt8, createdAt: Int64, output: String)? {
        guard let record = try? LogRecord(decoding: bytes) else { return nil }
        return (record.sourceID, record.level, record.createdAt, record.output)
    }

    /// How the uploader sends `records` (the journal's next ones): how many lead one request
    /// (of one source, within the budget; 0 when the first is not a record) and that
    /// request's `BatchCreateLogsRequest` bytes, made straight from the records.
    public static func logRequest(_ records: [[UInt8]]) -> (count: Int, request: [UInt8]) {
        let count = LogBatching.sameSourcePrefix(records).count
        return (count, LogRequestEncoding.request(records.prefix(count)))
    }

    /// A record's bytes as the journal keeps them (`sourceID`: 16 bytes).
    public static func encodeLogRecord(sourceID: [UInt8], level: UInt8, createdAt: Int64, output: String) -> [UInt8] {
        LogRecord(sourceID: sourceID, level: level, createdAt: createdAt, output: output).encode()
    }

    /// An ``UploadJournal`` opened on whatever `<name>.journal` and `<name>.cursor` hold in
    /// `directory`.
    public final class Journal {
        /// Records handed out by ``peek(maxRecords:maxBytes:)``, to acknowledge.
        public struct Batch {
            public let records: [[UInt8]]
            let batch: UploadJournal.Batch
        }

        let journal: UploadJournal

        /// Throws the open error's description when it cannot be opened.
        public init(directory: String, name: String, capacityBytes: Int) throws(JournalOpenError) {
            do {
                journal = try UploadJournal(directory: directory, name: name, capacityBytes: capacityBytes)
            } catch {
                throw JournalOpenError(description: "\(error)")
            }
        }

        public static func dataPath(directory: String, name: String) -> String { directory + "/" + name + ".journal" }
        public static func cursorPath(directory: String, name: String) -> String { directory + "/" + name + ".cursor" }

        public func peek(maxRecords: Int, maxBytes: Int) -> Batch? {
            journal.peek(maxRecords: maxRecords, maxBytes: maxBytes).map { Batch(records: $0.records, batch: $0) }
        }

        /// Acknowledges the first `count` records of `batch`.
        public func acknowledge(_ batch: Batch, count: Int) {
            journal.acknowledge(through: batch.batch.position(after: count))
        }

        @discardableResult
        public func append(_ record: [UInt8]) -> Bool { journal.append(record) }

        public var pendingRecords: Int { journal.pendingRecords }
        public var pendingBytes: Int { journal.pendingBytes }
        public var recoveredTruncations: Int { journal.recoveredTruncations }

        public func close() { journal.close() }
    }

    public struct JournalOpenError: Error, CustomStringConvertible {
        public let description: String
    }
}
