/// `BatchCreateLogsRequest` bytes made straight from journal records (``LogRecord``'s
/// encoding), with no `String` and no protobuf message per line: the uploader's per-line
/// cost is a header check and one copy of the text. The journal's records are the agent's
/// own (sanitised when written, CRC-checked when read), so their text is valid UTF-8.
///
/// Wire form: `log_source_id = 1` (16 bytes), then per line `logs = 2`
/// `Log{created_at = 1 Timestamp{seconds = 1, nanos = 2}, output = 2, level = 3}`; zero
/// fields are left out, as protobuf encoders do.
enum LogRequestEncoding {
    /// A record's fields, read in place; nil when the record is not a version-1 ``LogRecord``.
    struct Fields {
        var level: UInt8
        var createdAt: Int64
        /// Where the text starts in the record; it runs to the end.
        var outputStart: Int { LogRecord.headerBytes }
        var outputCount: Int

        /// What the line costs against a request's budget (``LogBatching``).
        var batchCost: Int { outputCount + LogBatching.overheadPerLog }
    }

    static func fields(_ record: [UInt8]) -> Fields? {
        guard record.count >= LogRecord.headerBytes, record[0] == LogRecord.formatVersion else { return nil }
        var time: UInt64 = 0
        for index in 0..<8 { time |= UInt64(record[2 + index]) << (8 * UInt64(index)) }
        return Fields(level: record[1], createdAt: Int64(bitPattern: time), outputCount: record.count - LogRecord.headerBytes)
    }

    /// Whether two records have the same log source (bytes 10..<26), compared in place.
    static func sameSource(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count >= LogRecord.headerBytes, b.count >= LogRecord.headerBytes else { return false }
        for index in 10..<26 where a[index] != b[index] { return false }
        return true
    }

    /// The request for `records` (all of one source, each a valid record).
    static func request(_ records: ArraySlice<[UInt8]>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(records.reduce(18) { $0 + $1.count + 16 })
        guard let first = records.first, first.count >= LogRecord.headerBytes else { return out }
        out.append(0x0A)
        out.append(16)
        out.append(contentsOf: first[10..<26])
        var log: [UInt8] = []
        var timestamp: [UInt8] = []
        for record in records {
            guard let fields = fields(record) else { continue }
            timestamp.removeAll(keepingCapacity: true)
            // Floor division without a multiplication that could overflow (a journal's
            // record may hold any Int64, Int64.min included).
            var (seconds, nanos) = fields.createdAt.quotientAndRemainder(dividingBy: 1_000_000_000)
            if nanos < 0 {
                seconds -= 1
                nanos += 1_000_000_000
            }
            if seconds != 0 { timestamp.append(0x08); appendVarint(UInt64(bitPattern: seconds), to: &timestamp) }
            if nanos != 0 { timestamp.append(0x10); appendVarint(UInt64(nanos), to: &timestamp) }
            log.removeAll(keepingCapacity: true)
            log.append(0x0A)
            appendVarint(UInt64(timestamp.count), to: &log)
            log.append(contentsOf: timestamp)
            if fields.outputCount > 0 {
                log.append(0x12)
                appendVarint(UInt64(fields.outputCount), to: &log)
                log.append(contentsOf: record[fields.outputStart...])
            }
            if fields.level != 0 {
                log.append(0x18)
                appendVarint(UInt64(fields.level), to: &log)
            }
            out.append(0x12)
            appendVarint(UInt64(log.count), to: &out)
            out.append(contentsOf: log)
        }
        return out
    }

    static func appendVarint(_ value: UInt64, to out: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
    }
}
