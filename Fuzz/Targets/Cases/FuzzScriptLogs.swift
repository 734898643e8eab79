import AgentProto
import FoundationEssentials
import Glibc
import Scripts
import SwiftProtobuf

/// The bytes the scripts module reads (Scripts' `Logs`, through `ScriptsFuzzing`). The first
/// byte picks the case.
///
/// 0, a script's output stream: cut into lines at a small bound (or the agent's default),
/// fed in chunks the input chooses, the lines are exactly a plain reading of the stream (a
/// line per `\n`, one `\r` before it dropped, the unterminated tail kept as is) however it is
/// split; none longer than the bound, a cut line is a prefix of its content of at least
/// the bound less three bytes (at a character boundary when the content is UTF-8) and the
/// suffix, and the cut count adds up. Each line, and the whole stream, sanitises to what Go's
/// `strings.ToValidUTF8(s, "❌")` and then NUL → `❌` give (read here with the standard
/// library's decoder): no NUL, valid text kept as is, at most three bytes per input byte.
///
/// 1, a journal record: any bytes decode or are refused, never a trap; they decode exactly
/// when the header is whole, the version known and the text UTF-8, and then re-encode to
/// the same bytes. A record made of the sanitised input decodes to itself.
///
/// 2, the upload journal: a data file and a cursor file (raw bytes, or a header and frames
/// with correct checksums, maybe torn or flipped, and a cursor with its checksum, of any
/// generation and offset), either missing; the journal opens, hands out exactly the frames
/// a plain reading finds after the cursor, up to the first bad one; then peeks (within their
/// limits, as much as fits), acknowledgements (also of earlier batches), appends (within the
/// capacity) and reopenings chosen by the input keep it a FIFO: acknowledged records never
/// come again, the rest always do, also after reopening, and a final record survives a
/// reopen.
///
/// 0xF0 and up, the upload's request: records of two sources (and now and then bytes that
/// are no record) give a leading run of one source's records, none when the first is no
/// record, and its request bytes, made by hand, decode with SwiftProtobuf as a
/// `BatchCreateLogsRequest` of exactly those lines: the source, each line's time (floor
/// seconds and nanoseconds), text and level.
public func fuzzScriptLogs(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let selector = input.byte()
    if selector >= 0xF0 {
        fuzzRequest(&input)
        return 0
    }
    switch selector % 3 {
    case 0: fuzzLines(&input)
    case 1: fuzzRecord(&input)
    default: fuzzJournal(&input)
    }
    return 0
}

// MARK: - Lines

private func fuzzLines(_ input: inout FuzzInput) {
    let bound = input.uint(2)
    let maxLineBytes: Int? = bound == 0xFFFF ? nil : Int(bound % 600)
    let stream = input.data(maxLength: 4096)
    let chunks = input.chunks(of: stream, maxChunk: Int(input.byte()) + 1)
    let split = ScriptsFuzzing.splitLines(chunks, maxLineBytes: maxLineBytes)
    let whole = ScriptsFuzzing.splitLines([stream], maxLineBytes: maxLineBytes)
    let limit = split.maxLineBytes
    require(limit == max(4, maxLineBytes ?? 64 * 1024), "the bound is \(limit)")
    require(split.lines.count == whole.lines.count, "\(split.lines.count) lines split, \(whole.lines.count) whole")
    for (a, b) in zip(split.lines, whole.lines) {
        require(a.bytes == b.bytes && a.truncated == b.truncated, "a line depends on where the stream is split")
    }
    let plain = plainLines(stream)
    require(split.lines.count == plain.count, "\(split.lines.count) lines, a plain reading finds \(plain.count)")
    let suffix = ScriptsFuzzing.truncationSuffix
    var cut = 0
    for (line, content) in zip(split.lines, plain) {
        require(!line.bytes.contains(0x0A), "a line holds a newline")
        if content.count <= limit {
            require(!line.truncated && line.bytes == content, "a line within the bound is not its content")
        } else {
            cut += 1
            require(line.truncated, "a line over the bound is not marked cut")
            require(line.bytes.count <= limit + suffix.count, "a line of \(line.bytes.count) bytes, bound \(limit)")
            require(line.bytes.count >= suffix.count && Array(line.bytes.suffix(suffix.count)) == suffix, "a cut line without its suffix")
            let kept = Array(line.bytes.dropLast(suffix.count))
            require(kept.count >= limit - 3 && kept.count <= limit, "\(kept.count) bytes kept of a bound of \(limit)")
            require(Array(content.prefix(kept.count)) == kept, "a cut line is not a prefix of its content")
            if String(validating: content, as: UTF8.self) != nil {
                // The last character boundary within the bound.
                let boundary = stride(from: limit, through: limit - 3, by: -1).first {
                    String(validating: content.prefix($0), as: UTF8.self) != nil
                }
                require(kept.count == boundary, "cut at \(kept.count), the character boundary is \(boundary ?? -1)")
            }
        }
        checkSanitized(line.bytes)
    }
    require(split.truncatedLines == cut && whole.truncatedLines == cut, "\(split.truncatedLines) lines counted cut, \(cut) were")
    checkSanitized(stream)
}

/// A line per `\n`, less one `\r` before it; a non-empty tail as is.
private func plainLines(_ stream: [UInt8]) -> [[UInt8]] {
    var lines: [[UInt8]] = []
    var start = 0
    for (index, byte) in stream.enumerated() where byte == 0x0A {
        var line = Array(stream[start..<index])
        if line.last == 0x0D { line.removeLast() }
        lines.append(line)
        start = index + 1
    }
    if start < stream.count { lines.append(Array(stream[start...])) }
    return lines
}

/// The sanitiser against Go's rule, read with the standard library's UTF-8 decoder: its
/// errors are maximal ill-formed subparts, whose bytes after the first are continuation
/// bytes, which Go also finds invalid one by one, so a run of errors is Go's run of invalid
/// bytes.
private func checkSanitized(_ bytes: [UInt8]) {
    let text = ScriptsFuzzing.sanitize(bytes)
    let mark = "\u{274C}"
    var expected = ""
    var inRun = false
    var iterator = bytes.makeIterator()
    var decoder = UTF8()
    decoding: while true {
        switch decoder.decode(&iterator) {
        case .scalarValue(let scalar):
            if scalar == "\0" { expected += mark } else { expected.unicodeScalars.append(scalar) }
            inRun = false
        case .error:
            if !inRun { expected += mark }
            inRun = true
        case .emptyInput:
            break decoding
        }
    }
    let utf8 = Array(text.utf8)
    require(!utf8.contains(0), "a NUL in sanitised text")
    require(utf8.count <= 3 * bytes.count, "\(utf8.count) bytes sanitised from \(bytes.count)")
    require(utf8 == Array(expected.utf8), "sanitised differently from Go's rule")
    if !bytes.contains(0), String(validating: bytes, as: UTF8.self) != nil {
        require(utf8 == bytes, "valid text changed")
    }
}

// MARK: - Records

private func fuzzRecord(_ input: inout FuzzInput) {
    let bytes = input.rest()
    let decoded = ScriptsFuzzing.decodeLogRecord(bytes)
    let valid = bytes.count >= 26 && bytes[0] == 1 && String(validating: bytes[26...], as: UTF8.self) != nil
    require((decoded != nil) == valid, valid ? "a well-formed record was refused" : "a malformed record decoded")
    if let record = decoded {
        let encoded = ScriptsFuzzing.encodeLogRecord(
            sourceID: record.sourceID, level: record.level, createdAt: record.createdAt, output: record.output)
        require(encoded == bytes, "a record re-encodes to other bytes")
        require(record.sourceID == Array(bytes[10..<26]) && record.level == bytes[1], "a record's fields are not its bytes")
    }
    // A record of the sanitised text, as the runner makes one.
    let text = ScriptsFuzzing.sanitize(bytes)
    let sourceID = Array((bytes + [UInt8](repeating: 0x5A, count: 16)).prefix(16))
    let createdAt = Int64(bitPattern: bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
    let level = bytes.last ?? 3
    let encoded = ScriptsFuzzing.encodeLogRecord(sourceID: sourceID, level: level, createdAt: createdAt, output: text)
    require(encoded.count == 26 + text.utf8.count, "a record of \(encoded.count) bytes")
    guard let again = ScriptsFuzzing.decodeLogRecord(encoded) else {
        require(false, "a record the runner made does not decode")
        return
    }
    require(
        again.sourceID == sourceID && again.level == level && again.createdAt == createdAt && again.output == text,
        "a record does not decode to itself")
}

// MARK: - Journal

private let journalName = "fuzz"
private let maxRecordBytes = 16 << 20

private func fuzzJournal(_ input: inout FuzzInput) {
    let flags = input.byte()
    let capacity = input.bool() ? 1 << 30 : Int(input.uint(2) % 5000)
    let dataFile: [UInt8]?
    if flags & 4 != 0 {
        // A header and frames with correct checksums, a torn tail, maybe a flipped byte.
        var file = Array("CJN1".utf8) + [0, 0, 0, 0] + le(UInt64(input.byte() % 4), 8)
        for _ in 0..<Int(input.byte() % 8) { file += frame(input.data(maxLength: 300)) }
        file += input.data(maxLength: 12)
        if flags & 16 != 0 {
            let at = Int(input.uint(2)) % file.count
            file[at] ^= max(1, input.byte())
        }
        dataFile = flags & 1 != 0 ? file : nil
    } else {
        let file = input.data(maxLength: 2048)
        dataFile = flags & 1 != 0 ? file : nil
    }
    let cursorFile: [UInt8]?
    if flags & 8 != 0 {
        let body = le(UInt64(input.byte() % 4), 8) + le(input.uint(2) % 4096, 8)
        cursorFile = flags & 2 != 0 ? Array("CJC1".utf8) + le(UInt64(crc32c(body)), 4) + body : nil
    } else {
        let file = input.data(maxLength: 40)
        cursorFile = flags & 2 != 0 ? file : nil
    }

    guard let directory = makeDirectory() else {
        require(false, "no temporary directory: errno \(errno)")
        return
    }
    defer { removeDirectory(directory) }
    let dataPath = ScriptsFuzzing.Journal.dataPath(directory: directory, name: journalName)
    let cursorPath = ScriptsFuzzing.Journal.cursorPath(directory: directory, name: journalName)
    if let dataFile { writeFile(dataPath, dataFile) }
    if let cursorFile { writeFile(cursorPath, cursorFile) }

    // What a plain reading of the files leaves unacknowledged.
    var pending = recoverable(data: dataFile ?? [], cursor: cursorFile ?? [])
    var journal = openJournal(directory, capacity)
    drainCheck(journal, pending)

    // Batches handed out since the journal was opened, with the count of records
    // acknowledged before each; that count now.
    var batches: [(batch: ScriptsFuzzing.Journal.Batch, start: Int)] = []
    var acknowledged = 0
    for _ in 0..<24 where !input.isEmpty {
        switch input.byte() % 5 {
        case 0, 1:
            let maxRecords = Int(input.byte() % 6)
            let maxBytes = Int(input.byte()) * 4
            let batch = journal.peek(maxRecords: maxRecords, maxBytes: maxBytes)
            checkPeek(batch, pending, maxRecords: maxRecords, maxBytes: maxBytes)
            if let batch {
                let count = min(Int(input.byte()) % (batch.records.count + 2), batch.records.count)
                journal.acknowledge(batch, count: count)
                pending.removeFirst(count)
                batches.append((batch, acknowledged))
                acknowledged += count
            }
        case 2:
            let record = input.data(maxLength: 300)
            let fits = pending.reduce(0) { $0 + 8 + $1.count } + 8 + record.count <= capacity
            require(journal.append(record) == fits, fits ? "a record within the capacity was refused" : "a record over the capacity was taken")
            if fits { pending.append(record) }
        case 3:
            // An earlier batch again: acknowledges what it reaches past the records
            // acknowledged already, else changes nothing.
            if !batches.isEmpty {
                let (batch, start) = batches[Int(input.byte()) % batches.count]
                let count = Int(input.byte()) % (batch.records.count + 1)
                journal.acknowledge(batch, count: count)
                if start + count > acknowledged {
                    pending.removeFirst(start + count - acknowledged)
                    acknowledged = start + count
                }
            }
        default:
            journal.close()
            require(journal.peek(maxRecords: 10, maxBytes: 1 << 20) == nil, "a closed journal handed out records")
            require(!journal.append([1]), "a closed journal took a record")
            journal = openJournal(directory, capacity)
            batches = []
            acknowledged = 0
        }
        require(journal.pendingRecords == pending.count, "\(journal.pendingRecords) records pending, \(pending.count) expected")
        require(journal.pendingBytes == pending.reduce(0) { $0 + 8 + $1.count }, "pending bytes do not add up")
    }

    // Everything handed out and acknowledged, one more record, reopened: only that one.
    drainCheck(journal, pending)
    var left = pending
    while let batch = journal.peek(maxRecords: 3, maxBytes: 512) {
        checkPeek(batch, left, maxRecords: 3, maxBytes: 512)
        journal.acknowledge(batch, count: batch.records.count)
        left.removeFirst(batch.records.count)
    }
    require(left.isEmpty && journal.pendingRecords == 0, "records left after acknowledging everything")
    let last: [UInt8] = Array("the last line".utf8)
    let taken = journal.append(last)
    require(taken == (8 + last.count <= capacity), "the last record was refused or taken wrongly")
    journal.close()
    journal = openJournal(directory, capacity)
    drainCheck(journal, taken ? [last] : [])
    journal.close()
}

private func openJournal(_ directory: String, _ capacity: Int) -> ScriptsFuzzing.Journal {
    do {
        return try ScriptsFuzzing.Journal(directory: directory, name: journalName, capacityBytes: capacity)
    } catch {
        fatalError("invariant violated: the journal did not open: \(error)")
    }
}

/// The journal hands out exactly `expected` (in batches of every size), without
/// acknowledging: the next peek starts over.
private func drainCheck(_ journal: ScriptsFuzzing.Journal, _ expected: [[UInt8]]) {
    require(journal.pendingRecords == expected.count, "\(journal.pendingRecords) records pending, \(expected.count) expected")
    require(journal.pendingBytes == expected.reduce(0) { $0 + 8 + $1.count }, "pending bytes do not add up")
    let all = journal.peek(maxRecords: Int.max, maxBytes: Int.max)
    require((all?.records ?? []) == expected, "the journal hands out \(all?.records.count ?? 0) records, \(expected.count) expected")
    let one = journal.peek(maxRecords: 1, maxBytes: 0)
    require(one?.records == expected.first.map { [$0] }, "the first record alone is not the first")
}

/// A non-empty prefix of `pending` (nil exactly when there is none), within the limits
/// unless the first record comes alone, and as long as they allow.
private func checkPeek(_ batch: ScriptsFuzzing.Journal.Batch?, _ pending: [[UInt8]], maxRecords: Int, maxBytes: Int) {
    guard let batch else {
        require(pending.isEmpty || maxRecords == 0, "nothing handed out with \(pending.count) records pending")
        return
    }
    let records = batch.records
    require(!records.isEmpty && records.count <= maxRecords, "\(records.count) records handed out, at most \(maxRecords)")
    require(Array(pending.prefix(records.count)) == records, "the records handed out are not the oldest pending, in order")
    let bytes = records.reduce(0) { $0 + $1.count }
    require(records.count == 1 || bytes <= maxBytes, "\(bytes) bytes handed out, at most \(maxBytes)")
    if records.count < maxRecords && records.count < pending.count {
        require(bytes + pending[records.count].count > maxBytes, "a batch stopped short")
    }
}

/// The journal's format read plainly: after a header of the cursor's generation, the
/// frames from its offset (past the end: none); else all frames; up to the first torn,
/// overlong or corrupt frame.
private func recoverable(data: [UInt8], cursor: [UInt8]) -> [[UInt8]] {
    guard data.count >= 16, Array(data[0..<4]) == Array("CJN1".utf8) else { return [] }
    let generation = readLE(data, 8, 8)
    var position = 16
    if cursor.count >= 24, Array(cursor[0..<4]) == Array("CJC1".utf8), readLE(cursor, 4, 4) == UInt64(crc32c(Array(cursor[8..<24]))),
        readLE(cursor, 16, 8) <= UInt64(Int.max), readLE(cursor, 8, 8) == generation
    {
        position = max(16, Int(readLE(cursor, 16, 8)))
    }
    var records: [[UInt8]] = []
    while position + 8 <= data.count {
        let length = Int(readLE(data, position, 4))
        guard length <= maxRecordBytes, position + 8 + length <= data.count else { break }
        let payload = Array(data[(position + 8)..<(position + 8 + length)])
        guard UInt64(crc32c(payload)) == readLE(data, position + 4, 4) else { break }
        records.append(payload)
        position += 8 + length
    }
    return records
}

private func frame(_ payload: [UInt8]) -> [UInt8] {
    le(UInt64(payload.count), 4) + le(UInt64(crc32c(payload)), 4) + payload
}

private func le(_ value: UInt64, _ width: Int) -> [UInt8] {
    (0..<width).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
}

private func readLE(_ bytes: [UInt8], _ offset: Int, _ width: Int) -> UInt64 {
    (0..<width).reduce(0) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
}

/// CRC-32C, bit by bit (the journal's is table-driven).
private func crc32c(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 == 1 ? 0x82F6_3B78 ^ (crc >> 1) : crc >> 1 }
    }
    return ~crc
}

// MARK: - Files

/// A fresh directory (in memory where `/dev/shm` is there).
private func makeDirectory() -> String? {
    let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
    var template = Array("\(base)/fuzz-journal-XXXXXX".utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { return nil }
    return String(cString: made)
}

private func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    require(fd >= 0, "cannot create \(path): errno \(errno)")
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    require(written == bytes.count, "cannot write \(path)")
    close(fd)
}

private func removeDirectory(_ directory: String) {
    for name in ["", ".tmp"].map({ journalName + ".journal" + $0 }) + [journalName + ".cursor"] {
        unlink(directory + "/" + name)
    }
    rmdir(directory)
}

private func fuzzRequest(_ input: inout FuzzInput) {
    let sources: [[UInt8]] = [Array(repeating: 0xAB, count: 16), Array(0..<16)]
    var records: [[UInt8]] = []
    var lines: [(source: Int, level: UInt8, createdAt: Int64, output: String)] = []
    for _ in 0..<(Int(input.byte() % 8) + 1) {
        if input.byte() % 8 == 0 {
            records.append([0xFF] + input.data(maxLength: 40))  // no version-1 record
            lines.append((-1, 0, 0, ""))
            continue
        }
        let line = (
            source: Int(input.byte() % 2), level: input.byte(), createdAt: Int64(bitPattern: input.uint(8)),
            output: ScriptsFuzzing.sanitize(input.data(maxLength: 64))
        )
        records.append(ScriptsFuzzing.encodeLogRecord(sourceID: sources[line.source], level: line.level, createdAt: line.createdAt, output: line.output))
        lines.append(line)
    }
    let (count, request) = ScriptsFuzzing.logRequest(records)
    // The run: records of the first one's source, up to the first that is not.
    let run = lines.firstIndex { $0.source != lines[0].source || $0.source < 0 } ?? lines.count
    require(count <= run && (count > 0) == (lines[0].source >= 0), "\(count) records lead a request of \(run) of one source")
    guard count > 0 else { return }
    guard let decoded = try? Coder_Agent_V2_BatchCreateLogsRequest(serializedBytes: request) else {
        require(false, "the request does not decode: \(request)")
        return
    }
    require(decoded.logSourceID == Data(sources[lines[0].source]), "the source changed")
    require(decoded.logs.count == count, "\(decoded.logs.count) lines sent for \(count)")
    for (log, line) in zip(decoded.logs, lines) {
        let time = Int128(log.createdAt.seconds) * 1_000_000_000 + Int128(log.createdAt.nanos)
        require(time == Int128(line.createdAt) && (0..<1_000_000_000).contains(log.createdAt.nanos), "time \(log.createdAt) for \(line.createdAt)")
        require(log.output == line.output && log.level.rawValue == Int(line.level), "a line changed on its way")
    }
}
