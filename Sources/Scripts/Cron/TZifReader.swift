/// Reads a TZif file (RFC 8536, versions 1 to 4) into a ``ZoneInfo``. The bytes are
/// untrusted: every count is checked against what is left before anything is read or kept,
/// and a malformed file is refused with an error, never a trap.
///
/// Of a v2+ file only the 64-bit data block and the footer are used; leap-second records and
/// the standard/UT indicators are checked for size and skipped (as Go's `time` does).
struct TZifReader {
    static let maxFileSize = 1 << 20

    /// RFC 8536's advised range for a local time type's UT offset (-25:59:59 ... +25:59:59).
    static let offsetRange: ClosedRange<Int32> = -89_999...93_599

    var bytes: [UInt8]
    var position = 0
    let name: String

    static func zone(from bytes: [UInt8], name: String) throws(CronError) -> ZoneInfo {
        guard bytes.count <= maxFileSize else {
            throw CronError("time zone \(CronError.quoted(name)): the TZif data is larger than \(maxFileSize) bytes")
        }
        var reader = TZifReader(bytes: bytes, name: name)
        return try reader.read()
    }

    struct Header {
        var version: UInt8
        var isUTCount: Int
        var isStandardCount: Int
        var leapCount: Int
        var transitionCount: Int
        var typeCount: Int
        var characterCount: Int
    }

    func failure(_ reason: String) -> CronError {
        CronError("time zone \(CronError.quoted(name)): not a valid TZif file: \(reason)")
    }

    mutating func read() throws(CronError) -> ZoneInfo {
        let first = try header()
        if first.version == 0 {
            return try block(first, timeSize: 4, footer: false)
        }
        // Skip the v1 block: its size follows from the counts.
        try skip(v1BlockSize(first))
        let second = try header()
        guard second.version == first.version else { throw failure("the two headers disagree on the version") }
        return try block(second, timeSize: 8, footer: true)
    }

    func v1BlockSize(_ header: Header) -> Int {
        header.transitionCount * 5 + header.typeCount * 6 + header.characterCount + header.leapCount * 8
            + header.isStandardCount + header.isUTCount
    }

    mutating func header() throws(CronError) -> Header {
        guard try take(4).elementsEqual("TZif".utf8) else { throw failure("no TZif magic") }
        let version = try byte()
        guard version == 0 || (UInt8(ascii: "2")...UInt8(ascii: "4")).contains(version) else {
            throw failure("unknown version \(version)")
        }
        try skip(15)
        var counts: [Int] = []
        for _ in 0..<6 { counts.append(Int(try uint32())) }
        let header = Header(
            version: version, isUTCount: counts[0], isStandardCount: counts[1], leapCount: counts[2],
            transitionCount: counts[3], typeCount: counts[4], characterCount: counts[5])
        guard header.typeCount > 0 else { throw failure("no local time types") }
        guard header.isUTCount == 0 || header.isUTCount == header.typeCount,
            header.isStandardCount == 0 || header.isStandardCount == header.typeCount
        else { throw failure("indicator counts differ from the type count") }
        return header
    }

    mutating func block(_ header: Header, timeSize: Int, footer: Bool) throws(CronError) -> ZoneInfo {
        let needed =
            header.transitionCount * (timeSize + 1) + header.typeCount * 6 + header.characterCount
            + header.leapCount * (timeSize + 4) + header.isStandardCount + header.isUTCount
        guard needed <= bytes.count - position else { throw failure("the data block is cut short") }

        var transitions: [Int64] = []
        transitions.reserveCapacity(header.transitionCount)
        for _ in 0..<header.transitionCount {
            let time = timeSize == 4 ? Int64(Int32(bitPattern: try uint32())) : Int64(bitPattern: try uint64())
            if let last = transitions.last, time <= last { throw failure("transition times are not ascending") }
            transitions.append(time)
        }
        var typeIndices: [Int] = []
        typeIndices.reserveCapacity(header.transitionCount)
        for _ in 0..<header.transitionCount {
            let index = Int(try byte())
            guard index < header.typeCount else { throw failure("a transition names local time type \(index) of \(header.typeCount)") }
            typeIndices.append(index)
        }
        var offsets: [Int32] = []
        for _ in 0..<header.typeCount {
            let offset = Int32(bitPattern: try uint32())
            guard Self.offsetRange.contains(offset) else { throw failure("UT offset \(offset) out of range") }
            let isDST = try byte()
            guard isDST <= 1 else { throw failure("a DST flag that is neither 0 nor 1") }
            let designation = Int(try byte())
            guard designation < header.characterCount else { throw failure("a designation index past the designations") }
            offsets.append(offset)
        }
        try skip(header.characterCount + header.leapCount * (timeSize + 4) + header.isStandardCount + header.isUTCount)

        var rule: PosixTZRule?
        if footer {
            // "\n" TZ-string "\n"; a missing or unusable one leaves the last transition in force.
            let rest = bytes[position...]
            if rest.first == UInt8(ascii: "\n"), let end = rest.dropFirst().firstIndex(of: UInt8(ascii: "\n")) {
                let text = bytes[(position + 1)..<end]
                if !text.isEmpty { rule = PosixTZRule(text) }
            }
        }
        return ZoneInfo(
            name: name, transitions: transitions, offsets: typeIndices.map { offsets[$0] },
            firstOffset: offsets[0], rule: rule)
    }

    mutating func take(_ count: Int) throws(CronError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= bytes.count - position else { throw failure("cut short") }
        defer { position += count }
        return bytes[position..<(position + count)]
    }

    mutating func byte() throws(CronError) -> UInt8 {
        guard position < bytes.count else { throw failure("cut short") }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func skip(_ count: Int) throws(CronError) {
        _ = try take(count)
    }

    mutating func uint32() throws(CronError) -> UInt32 {
        try take(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func uint64() throws(CronError) -> UInt64 {
        try take(8).reduce(0) { $0 << 8 | UInt64($1) }
    }
}
