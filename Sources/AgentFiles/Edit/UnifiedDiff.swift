/// A unified diff with three lines of context, `--- <path>` and `+++ <path>` headers (no
/// `a/` `b/`), as the reference answers `include_diff`; "" when nothing changed.
enum UnifiedDiff {
    enum Op: Equatable { case equal, delete, insert }

    /// The middle of the texts is compared line by line (LCS) when it has at most this many
    /// cells; beyond, it is shown as removed and added whole (bounded time and memory).
    static let maxCells = 4_000_000

    /// Lines compared by the LCS at most on either side, whatever the other holds: a window
    /// of more lines is shown as removed and added whole, streamed from the bytes, so its
    /// lines are never held one by one.
    static let maxComparedLines = 65_536

    /// What ``make(path:old:new:limit:)`` answers: the text, and whether it stops short of
    /// the whole diff because `limit` was reached (its last hunk's header counts the lines
    /// it shows).
    struct Result: Equatable {
        var text: String
        var truncated: Bool
    }

    static func make(path: String, old: [UInt8], new: [UInt8]) -> String {
        make(path: path, old: old, new: new, limit: .max).text
    }

    /// The diff, at most about `limit` bytes of it (headers, and whole lines: the first line
    /// of a hunk always shows). Time and memory follow what is shown, not the files' size.
    static func make(path: String, old: [UInt8], new: [UInt8], limit: Int) -> Result {
        guard old != new else { return Result(text: "", truncated: false) }
        // Only the changed middle (with three lines of context each side) is split into
        // lines: a one-word edit of a large file costs the bytes compared, not a copy of
        // every line.
        let (window, skipped) = changedWindow(old, new)
        var out = Output(text: "--- \(path)\n+++ \(path)\n", limit: limit)
        let aLines = lineCount(old[window.old])
        let bLines = lineCount(new[window.new])
        guard max(aLines, bLines) <= maxComparedLines, aLines * bLines <= maxCells else {
            streamWhole(old[window.old], new[window.new], skipped: skipped, into: &out)
            return Result(text: out.text, truncated: out.truncated)
        }
        let a = TextLine.split(Array(old[window.old])).map { $0.text + $0.ending }
        let b = TextLine.split(Array(new[window.new])).map { $0.text + $0.ending }
        let ops = script(a, b)
        // Group changes with up to 3 lines of context on each side.
        var index = 0
        var aLine = 0
        var bLine = 0
        var positions: [(op: Op, a: Int, b: Int)] = []
        for op in ops {
            positions.append((op, aLine, bLine))
            switch op {
            case .equal: aLine += 1; bLine += 1
            case .delete: aLine += 1
            case .insert: bLine += 1
            }
        }
        while index < positions.count, !out.truncated {
            guard let change = positions[index...].firstIndex(where: { $0.op != .equal }) else { break }
            let start = max(0, change - 3)
            var end = change
            var lastChange = change
            while end < positions.count {
                if positions[end].op != .equal { lastChange = end }
                if end - lastChange > 6 { break }
                end += 1
            }
            end = min(positions.count, lastChange + 4)
            var hunk = Hunk(aStart: positions[start].a + skipped, bStart: positions[start].b + skipped)
            for entry in positions[start..<end] {
                let bytes = entry.op == .insert ? b[entry.b][...] : a[entry.a][...]
                guard hunk.add(entry.op, bytes, room: out.room) else { break }
            }
            out.append(hunk)
            index = end
        }
        return Result(text: out.text, truncated: out.truncated)
    }

    /// The diff's text so far, and how much more may follow.
    struct Output {
        var text: String
        let limit: Int
        var truncated = false

        /// Bytes a hunk may still take (at least its first line always fits).
        var room: Int { limit - text.utf8.count }

        mutating func append(_ hunk: Hunk) {
            if hunk.full { truncated = true }
            guard hunk.aCount + hunk.bCount > 0 else { return }
            text += "@@ -\(UnifiedDiff.range(hunk.aStart, hunk.aCount)) +\(UnifiedDiff.range(hunk.bStart, hunk.bCount)) @@\n"
            text += hunk.body
        }
    }

    /// One hunk as it is built: its lines, and the counts its header gives.
    struct Hunk {
        var aStart: Int
        var bStart: Int
        var aCount = 0
        var bCount = 0
        var body = ""
        /// A line did not fit: the hunk ends here, and so does the diff.
        var full = false

        /// Adds a line unless it would take the body past `room` (the first always fits).
        mutating func add(_ op: Op, _ bytes: ArraySlice<UInt8>, room: Int) -> Bool {
            let text = UnifiedDiff.line(bytes)
            guard aCount + bCount == 0 || body.utf8.count + text.utf8.count + 1 <= room - 64 else {
                full = true
                return false
            }
            switch op {
            case .equal: body += " " + text; aCount += 1; bCount += 1
            case .delete: body += "-" + text; aCount += 1
            case .insert: body += "+" + text; bCount += 1
            }
            return true
        }
    }

    /// A window too large to compare line by line, as one hunk: the lines both sides share
    /// at its edges (three at most) as context, the rest of the old lines removed and of the
    /// new ones added, read from the bytes as they are written.
    private static func streamWhole(_ old: ArraySlice<UInt8>, _ new: ArraySlice<UInt8>, skipped: Int, into out: inout Output) {
        var oldLines = LineCursor(old)
        var newLines = LineCursor(new)
        var oldTail = LineCursor(old)
        var newTail = LineCursor(new)
        var prefix = 0
        var prefixBytes = 0
        while let x = oldLines.next(), let y = newLines.next(), old[x] == new[y] {
            prefix += 1
            prefixBytes = x.upperBound - old.startIndex
        }
        var suffix = 0
        var suffixBytes = 0
        while let x = oldTail.previous(), let y = newTail.previous(), old[x] == new[y],
            x.lowerBound - old.startIndex >= prefixBytes, y.lowerBound - new.startIndex >= prefixBytes
        {
            suffix += 1
            suffixBytes = old.endIndex - x.lowerBound
        }
        let shown = min(prefix, 3)
        var hunk = Hunk(aStart: skipped + prefix - shown, bStart: skipped + prefix - shown)
        var lines = LineCursor(old)
        for _ in 0..<(prefix - shown) { _ = lines.next() }
        for _ in 0..<shown { if let x = lines.next() { _ = hunk.add(.equal, old[x], room: out.room) } }
        let oldMiddle = old[(old.startIndex + prefixBytes)..<(old.endIndex - suffixBytes)]
        let newMiddle = new[(new.startIndex + prefixBytes)..<(new.endIndex - suffixBytes)]
        for (op, side) in [(Op.delete, oldMiddle), (Op.insert, newMiddle)] where !hunk.full {
            var cursor = LineCursor(side)
            while let x = cursor.next(), hunk.add(op, side[x], room: out.room) {}
        }
        var tail = LineCursor(old[(old.endIndex - suffixBytes)...])
        for _ in 0..<min(suffix, 3) where !hunk.full {
            if let x = tail.next() { _ = hunk.add(.equal, old[x], room: out.room) }
        }
        out.append(hunk)
    }

    /// Lines of `bytes` (a last line without its newline counts).
    static func lineCount(_ bytes: ArraySlice<UInt8>) -> Int {
        var count = 0
        var cursor = LineCursor(bytes)
        while cursor.next() != nil { count += 1 }
        return count
    }

    /// The byte ranges of both texts that hold every changed line plus three lines of
    /// context each side (whole lines), and how many equal lines come before them.
    static func changedWindow(_ old: [UInt8], _ new: [UInt8]) -> (window: (old: Range<Int>, new: Range<Int>), skipped: Int) {
        let newline = UInt8(ascii: "\n")
        let shortest = min(old.count, new.count)
        var prefix = 0
        while prefix < shortest, old[prefix] == new[prefix] { prefix += 1 }
        // Back to a line start, then three more lines back for context.
        var start = prefix
        while start > 0, old[start - 1] != newline { start -= 1 }
        for _ in 0..<3 where start > 0 {
            start -= 1
            while start > 0, old[start - 1] != newline { start -= 1 }
        }
        var suffix = 0
        while suffix < shortest - start, old[old.count - 1 - suffix] == new[new.count - 1 - suffix] { suffix += 1 }
        // The shared tail must be whole lines in both texts, then three lines of context.
        func atLineStart(_ bytes: [UInt8], _ index: Int) -> Bool { index == start || bytes[index - 1] == newline }
        while suffix > 0, !(atLineStart(old, old.count - suffix) && atLineStart(new, new.count - suffix)) { suffix -= 1 }
        for _ in 0..<3 where suffix > 0 {
            suffix -= 1
            while suffix > 0, !atLineStart(old, old.count - suffix) { suffix -= 1 }
        }
        let skipped = old[0..<start].reduce(0) { $1 == newline ? $0 + 1 : $0 }
        return ((start..<(old.count - suffix), start..<(new.count - suffix)), skipped)
    }

    static func range(_ start: Int, _ count: Int) -> String {
        if count == 0 { return "\(start),0" }
        return count == 1 ? "\(start + 1)" : "\(start + 1),\(count)"
    }

    static func line(_ bytes: ArraySlice<UInt8>) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        return text.hasSuffix("\n") ? text : text + "\n\\ No newline at end of file\n"
    }

    /// The edit script: common prefix and suffix, and an LCS of the middle.
    static func script(_ a: [[UInt8]], _ b: [[UInt8]]) -> [Op] {
        var prefix = 0
        while prefix < a.count, prefix < b.count, a[prefix] == b[prefix] { prefix += 1 }
        var suffix = 0
        while suffix < a.count - prefix, suffix < b.count - prefix, a[a.count - 1 - suffix] == b[b.count - 1 - suffix] { suffix += 1 }
        let x = Array(a[prefix..<(a.count - suffix)])
        let y = Array(b[prefix..<(b.count - suffix)])
        var middle: [Op] = []
        if x.count * y.count <= maxCells && !x.isEmpty && !y.isEmpty {
            // Each distinct line becomes a number, so a cell compares two integers instead of
            // two byte arrays; the table is one flat array (4 bytes a cell, 16 MB at most).
            var numbers: [[UInt8]: Int32] = [:]
            func number(_ line: [UInt8]) -> Int32 {
                if let known = numbers[line] { return known }
                let next = Int32(numbers.count)
                numbers[line] = next
                return next
            }
            let xs = x.map(number)
            let ys = y.map(number)
            let width = ys.count + 1
            // lengths[i * width + j]: LCS of x[i...] and y[j...].
            var lengths = [Int32](repeating: 0, count: (xs.count + 1) * width)
            lengths.withUnsafeMutableBufferPointer { cell in
                for i in stride(from: xs.count - 1, through: 0, by: -1) {
                    for j in stride(from: ys.count - 1, through: 0, by: -1) {
                        cell[i * width + j] =
                            xs[i] == ys[j]
                            ? cell[(i + 1) * width + j + 1] + 1 : max(cell[(i + 1) * width + j], cell[i * width + j + 1])
                    }
                }
            }
            var i = 0
            var j = 0
            while i < xs.count || j < ys.count {
                if i < xs.count, j < ys.count, xs[i] == ys[j] {
                    middle.append(.equal); i += 1; j += 1
                } else if i < xs.count, j == ys.count || lengths[(i + 1) * width + j] >= lengths[i * width + j + 1] {
                    middle.append(.delete); i += 1
                } else {
                    middle.append(.insert); j += 1
                }
            }
        } else {
            middle = Array(repeating: .delete, count: x.count) + Array(repeating: .insert, count: y.count)
        }
        return Array(repeating: .equal, count: prefix) + middle + Array(repeating: .equal, count: suffix)
    }
}
