import AgentCore
/// The text rules for instruction files: the description line, and the sanitising the
/// legacy `context-config` answer applies (the pushed snapshot carries the bytes verbatim).
public enum InstructionText {
    /// The first non-empty line, trimmed, without a leading Markdown heading marker (`#`s
    /// and the spaces after them).
    public static func firstLine(_ text: String) -> String { firstLine(utf8: Array(text.utf8)) }

    /// ``firstLine(_:)`` of a file's bytes, split at `\n` bytes (so a CRLF line ends at its
    /// CR) and decoded only from the first line that is not ASCII white space.
    public static func firstLine(utf8 bytes: [UInt8]) -> String {
        var lineStart = 0
        while lineStart <= bytes.count {
            let lineEnd = bytes[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            let line = bytes[lineStart..<lineEnd]
            lineStart = lineEnd + 1
            if line.allSatisfy({ $0 == UInt8(ascii: " ") || (0x09...0x0D).contains($0) }) { continue }
            let trimmed = String(decoding: line, as: UTF8.self).goTrimmed
            if trimmed.isEmpty { continue }
            guard trimmed.hasPrefix("#") else { return trimmed }
            return String(trimmed.drop { $0 == "#" }).goTrimmed
        }
        return ""
    }

    /// Sanitises instruction text for a prompt: CRLF and lone CR become LF, HTML comments
    /// go (multi-line, shortest match), invisible characters go, and the result is trimmed.
    public static func sanitized(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        var previousCR = false
        for scalar in text.unicodeScalars {
            if scalar == "\r" {
                scalars.append("\n")
                previousCR = true
                continue
            }
            if scalar == "\n", previousCR {
                previousCR = false
                continue
            }
            previousCR = false
            scalars.append(scalar)
        }
        let uncommented = removingHTMLComments(String(scalars))
        var visible = String.UnicodeScalarView()
        for scalar in uncommented.unicodeScalars where !isInvisible(scalar) { visible.append(scalar) }
        return String(visible).goTrimmed
    }

    /// Every `<!--` … `-->`, shortest match first; an unclosed `<!--` stays. One pass: once
    /// no `-->` follows an opening, none follows a later one either, so the rest is kept.
    public static func removingHTMLComments(_ text: String) -> String {
        String(decoding: removingHTMLComments(utf8: Array(text.utf8)[...]), as: UTF8.self)
    }

    /// ``removingHTMLComments(_:)`` over bytes, in one pass.
    public static func removingHTMLComments(utf8 bytes: ArraySlice<UInt8>) -> [UInt8] {
        let open = Array("<!--".utf8), close = Array("-->".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if bytes[i] == open[0], bytes[i...].starts(with: open) {
                guard let end = firstIndex(of: close, in: bytes, from: i + open.count) else { break }
                i = end + close.count
                continue
            }
            out.append(bytes[i])
            i += 1
        }
        out += bytes[min(i, bytes.endIndex)...]
        return out
    }

    private static func firstIndex(of needle: [UInt8], in bytes: ArraySlice<UInt8>, from start: Int) -> Int? {
        var i = start
        while i + needle.count <= bytes.endIndex {
            if bytes[i] == needle[0], bytes[i...].starts(with: needle) { return i }
            i += 1
        }
        return nil
    }

    /// The invisible code points stripped from instructions (soft hyphens, zero-width and
    /// bidirectional controls, variation selectors, fillers, the BOM, interlinear marks).
    public static func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00AD, 0x034F, 0x061C, 0x070F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B...0x180F, 0x200B,
            0x200D...0x200F, 0x202A...0x202E, 0x2060...0x206F, 0x3164, 0xFE00...0xFE0F, 0xFEFF, 0xFFA0, 0xFFF0...0xFFF8:
            true
        default:
            false
        }
    }
}
