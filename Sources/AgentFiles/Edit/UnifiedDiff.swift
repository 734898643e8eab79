/// A unified diff with three lines of context, `--- <path>` and `+++ <path>` headers (no
/// `a/` `b/`), as the reference answers `include_diff`; "" when nothing changed.
enum UnifiedDiff {
    enum Op: Equatable { case equal, delete, insert }

    /// The middle of the texts is compared line by line (LCS) when it has at most this many
    /// cells; beyond, it is shown as removed and added whole (bounded time and memory).
    static let maxCells = 4_000_000

    static func make(path: String, old: [UInt8], new: [UInt8]) -> String {
        guard old != new else { return "" }
        // Only the changed middle (with three lines of context each side) is split into
        // lines: a one-word edit of a large file costs the bytes compared, not a copy of
        // every line.
        let (window, skipped) = changedWindow(old, new)
        let a = TextLine.split(Array(old[window.old])).map { $0.text + $0.ending }
        let b = TextLine.split(Array(new[window.new])).map { $0.text + $0.ending }
        let ops = script(a, b)
        var out = "--- \(path)\n+++ \(path)\n"
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
        while index < positions.count {
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
            let hunk = positions[start..<end]
            let aStart = hunk.first!.a + skipped
            let bStart = hunk.first!.b + skipped
            let aCount = hunk.filter { $0.op != .insert }.count
            let bCount = hunk.filter { $0.op != .delete }.count
            out += "@@ -\(range(aStart, aCount)) +\(range(bStart, bCount)) @@\n"
            for entry in hunk {
                switch entry.op {
                case .equal: out += " " + line(a[entry.a])
                case .delete: out += "-" + line(a[entry.a])
                case .insert: out += "+" + line(b[entry.b])
                }
            }
            index = end
        }
        return out
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

    private static func range(_ start: Int, _ count: Int) -> String {
        if count == 0 { return "\(start),0" }
        return count == 1 ? "\(start + 1)" : "\(start + 1),\(count)"
    }

    private static func line(_ bytes: [UInt8]) -> String {
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
