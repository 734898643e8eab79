import AgentJSON

/// The pieces of Go's `strings`, `bytes` and `bufio` that the reference's readers use, on
/// bytes, so that odd files split and trim exactly as they do there.
enum GoText {
    /// `bufio.Scanner`'s default largest token: a longer line ends the scan silently in the
    /// reference's loops (they never check `Err`).
    static let maxScanToken = 64 * 1024

    /// ASCII white space, as Go's `TrimSpace` and `Fields` see it in these files.
    static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (0x09...0x0d).contains(byte)
    }

    /// `bytes.TrimSpace`.
    static func trimSpace(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, isSpace(first) { slice = slice.dropFirst() }
        while let last = slice.last, isSpace(last) { slice = slice.dropLast() }
        return slice
    }

    /// `strings.Fields`: the runs of non-space bytes.
    static func fields(_ bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        bytes.split(whereSeparator: isSpace)
    }

    /// The lines `bufio.Scanner` with `ScanLines` yields: split at `\n`, one trailing `\r`
    /// dropped, no empty last line; the scan stops at the first line of ``maxScanToken`` or more.
    static func scannerLines(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
            var line = bytes[start..<end]
            if line.count >= maxScanToken { break }
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            lines.append(line)
            start = end == bytes.endIndex ? end : end + 1
        }
        return lines
    }

    /// The bytes as text (invalid UTF-8 replaced), for messages.
    static func string(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// Go's `%q` of the bytes.
    static func quote(_ bytes: ArraySlice<UInt8>) -> String {
        goQuote(string(bytes))
    }

    /// Whether `needle` occurs in `haystack` (`bytes.Contains`).
    static func contains(_ haystack: ArraySlice<UInt8>, _ needle: String) -> Bool {
        let pattern = Array(needle.utf8)
        guard !pattern.isEmpty else { return true }
        guard haystack.count >= pattern.count else { return false }
        var index = haystack.startIndex
        while index <= haystack.endIndex - pattern.count {
            if haystack[index] == pattern[0], haystack[index..<(index + pattern.count)].elementsEqual(pattern) { return true }
            index += 1
        }
        return false
    }
}
