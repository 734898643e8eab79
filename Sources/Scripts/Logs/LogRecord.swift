/// One log line on its way to the control plane, as kept in the ``UploadJournal``: which
/// log source it belongs to, its wire level (`Log.Level`), when it was read and its
/// sanitised text.
///
/// Encoding (compact, little-endian, 26 bytes + output):
/// `[version 1][level u8][createdAt i64 ns since the Unix epoch][sourceID 16][output UTF-8]`
/// — the output runs to the end (the journal frames each record). Decoding is a total
/// function: any byte string either decodes or throws ``DecodingError``, never traps.
struct LogRecord: Equatable, Sendable {
    /// Wire `Log.Level` values (coder's agent proto).
    static let levelUnspecified: UInt8 = 0
    static let levelTrace: UInt8 = 1
    static let levelDebug: UInt8 = 2
    static let levelInfo: UInt8 = 3
    static let levelWarn: UInt8 = 4
    static let levelError: UInt8 = 5

    static let formatVersion: UInt8 = 1
    static let headerBytes = 26
    static let sourceIDBytes = 16

    /// Why bytes are not a record (see ``init(decoding:)``).
    enum DecodingError: Error, Equatable {
        case tooShort(Int)
        case unknownVersion(UInt8)
        case invalidUTF8
    }

    /// The log source's UUID, 16 bytes.
    let sourceID: [UInt8]
    let level: UInt8
    /// Nanoseconds since the Unix epoch.
    let createdAt: Int64
    let output: String

    /// `sourceID` must be 16 bytes (a UUID); a programming error otherwise.
    init(sourceID: [UInt8], level: UInt8, createdAt: Int64, output: String) {
        precondition(sourceID.count == Self.sourceIDBytes, "a log source ID is 16 bytes")
        self.sourceID = sourceID
        self.level = level
        self.createdAt = createdAt
        self.output = output
    }

    func encode() -> [UInt8] {
        var output = self.output
        let count = output.utf8.count
        return [UInt8](unsafeUninitializedCapacity: Self.headerBytes + count) { buffer, initialized in
            buffer[0] = Self.formatVersion
            buffer[1] = level
            let time = UInt64(bitPattern: createdAt)
            for index in 0..<8 { buffer[2 + index] = UInt8(truncatingIfNeeded: time >> (8 * UInt64(index))) }
            for index in 0..<Self.sourceIDBytes { buffer[10 + index] = sourceID[index] }
            output.withUTF8 { utf8 in
                if let source = utf8.baseAddress, count > 0, let target = buffer.baseAddress {
                    (target + Self.headerBytes).initialize(from: source, count: count)
                }
            }
            initialized = Self.headerBytes + count
        }
    }

    /// The record for one line of a script's output, sanitised (``LogSanitizer``), made
    /// straight from the line's bytes: clean text (the common case) is copied once, with no
    /// `String` in between.
    static func encode(sourceID: [UInt8], level: UInt8, createdAt: Int64, sanitizing line: UnsafeRawBufferPointer) -> [UInt8] {
        let clean = line.withMemoryRebound(to: UInt8.self) { LogSanitizer.isCleanUTF8($0) }
        guard clean else {
            return LogRecord(sourceID: sourceID, level: level, createdAt: createdAt, output: LogSanitizer.sanitize(line)).encode()
        }
        precondition(sourceID.count == sourceIDBytes, "a log source ID is 16 bytes")
        return [UInt8](unsafeUninitializedCapacity: headerBytes + line.count) { buffer, initialized in
            buffer[0] = formatVersion
            buffer[1] = level
            let time = UInt64(bitPattern: createdAt)
            for index in 0..<8 { buffer[2 + index] = UInt8(truncatingIfNeeded: time >> (8 * UInt64(index))) }
            for index in 0..<sourceIDBytes { buffer[10 + index] = sourceID[index] }
            if let source = line.baseAddress, line.count > 0, let target = buffer.baseAddress {
                UnsafeMutableRawPointer(target + headerBytes).copyMemory(from: source, byteCount: line.count)
            }
            initialized = headerBytes + line.count
        }
    }

    init(decoding bytes: some Collection<UInt8>) throws(DecodingError) {
        let bytes = Array(bytes)
        guard bytes.count >= Self.headerBytes else { throw .tooShort(bytes.count) }
        guard bytes[0] == Self.formatVersion else { throw .unknownVersion(bytes[0]) }
        var time: UInt64 = 0
        for index in 0..<8 { time |= UInt64(bytes[2 + index]) << (8 * UInt64(index)) }
        guard let output = String(validating: bytes[Self.headerBytes...], as: UTF8.self) else { throw .invalidUTF8 }
        self.init(sourceID: Array(bytes[10..<26]), level: bytes[1], createdAt: Int64(bitPattern: time), output: output)
    }

    /// What this line costs against a request's byte budget (see ``LogBatching``).
    var batchCost: Int { output.utf8.count + LogBatching.overheadPerLog }
}
