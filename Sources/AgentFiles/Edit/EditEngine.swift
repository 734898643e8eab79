import AgentCore
import CAgentSpawn

#if canImport(Glibc)
import Glibc
#endif

/// Applies one search/replace edit to a file's bytes (spec file-api §1, edit-files): an
/// exact pass, then two passes over windows of lines that forgive trailing whitespace and
/// then all surrounding whitespace; line endings, indentation and a missing final newline
/// of the file are kept.
enum EditEngine {
    struct Edit: Sendable {
        var search: [UInt8]
        var replacement: [UInt8]
        var replaceAll: Bool
    }

    /// A refused edit: the message names the file.
    struct Failure: Error, Sendable {
        var message: String
    }

    /// Matching costs time linear in the file and the search (the exact pass with
    /// `memmem`, the line passes with KMP over per-line hashes); memory is the file, the
    /// result and 32 bytes per file line. `token` is checked every few thousand lines.
    static func apply(_ edit: Edit, to content: [UInt8], path: String, token: CancelToken? = nil) throws -> [UInt8] {
        guard !edit.search.isEmpty else { throw Failure(message: "\(path): search string must not be empty") }
        let searchLines = TextLine.split(edit.search)
        let replacementLines = TextLine.split(edit.replacement)
        let endings = EndingCounts(content)
        let replacement = adaptEndings(edit.replacement, replacementLines, search: searchLines, file: endings)

        // Pass 1: the exact bytes.
        let hits = try occurrences(of: edit.search, in: content, token: token)
        if hits.count == 1 || (edit.replaceAll && !hits.isEmpty) {
            var out: [UInt8] = []
            out.reserveCapacity(content.count + hits.count * max(0, replacement.count - edit.search.count))
            var position = 0
            for hit in hits {
                out += content[position..<hit]
                out += replacement
                position = hit + edit.search.count
            }
            return out + content[position...]
        }
        if hits.count > 1 {
            throw Failure(message: "\(path): search string matches \(hits.count) occurrences (expected exactly 1); add surrounding lines to make it unique, or set replace_all")
        }
        // Differing consistent endings of search and replacement: only the exact pass.
        if let s = searchLines.consistentEnding, let r = replacementLines.consistentEnding, s != r {
            throw Failure(message: "\(path): search string not found in file")
        }
        let file = FileLines(content)
        for pass in [Pass.trailingWhitespace, .allWhitespace] {
            let windows = try matchingWindows(searchLines, in: file, pass: pass, token: token)
            guard !windows.isEmpty else { continue }
            if windows.count > 1 && !edit.replaceAll {
                throw Failure(message: "\(path): search string matches \(windows.count) occurrences (expected exactly 1); add surrounding lines to make it unique, or set replace_all")
            }
            var fileUnit: Indentation.Unit??
            var out: [UInt8] = []
            out.reserveCapacity(content.count)
            var position = 0
            for start in windows {
                let window = (start..<(start + searchLines.count)).map { file.line($0) }
                let unit: Indentation.Unit? = Indentation.unit(of: window) ?? {
                    if fileUnit == nil { fileUnit = .some(file.indentationUnit()) }
                    return fileUnit!
                }()
                let spliced = splice(window: window, search: searchLines, replacement: replacementLines, fileUnit: unit, fileEnding: endings.dominant)
                out += content[position..<file.spans[start].start]
                out += spliced.bytes
                position = file.spans[start + searchLines.count - 1].end
            }
            return out + content[position...]
        }
        throw Failure(message: "\(path): search string not found in file")
    }

    // MARK: Matching

    enum Pass { case trailingWhitespace, allWhitespace }

    /// Non-overlapping exact occurrences, in order (glibc's `memmem`: linear time).
    static func occurrences(of needle: [UInt8], in haystack: [UInt8], token: CancelToken? = nil) throws -> [Int] {
        guard !needle.isEmpty, needle.count <= haystack.count else { return [] }
        var hits: [Int] = []
        try haystack.withUnsafeBytes { hay in
            try needle.withUnsafeBytes { pin in
                var index = 0
                while index <= hay.count - pin.count {
                    if hits.count & 1023 == 1023 { try token?.check() }
                    guard let found = agent_memmem(hay.baseAddress! + index, hay.count - index, pin.baseAddress!, pin.count) else { break }
                    let at = hay.baseAddress!.distance(to: UnsafeRawPointer(found))
                    hits.append(at)
                    index = at + pin.count
                }
            }
        }
        return hits
    }

    /// Start indices of non-overlapping windows of file lines matching the search lines:
    /// KMP over 64-bit hashes of each line's normalised text, each candidate checked byte
    /// for byte (a hash collision is never taken for a match).
    static func matchingWindows(_ search: [TextLine], in file: FileLines, pass: Pass, token: CancelToken? = nil) throws -> [Int] {
        let m = search.count
        guard m > 0, m <= file.count else { return [] }
        func key(_ line: TextLine) -> ArraySlice<UInt8> { pass == .trailingWhitespace ? line.trimmedTrailing : line.trimmedAll }
        let pattern = search.map { LineHash.of(key($0)) }
        // The KMP failure function of the pattern.
        var failure = [Int](repeating: 0, count: m)
        var k = 0
        for i in 1..<max(m, 1) {
            while k > 0, pattern[i] != pattern[k] { k = failure[k - 1] }
            if pattern[i] == pattern[k] { k += 1 }
            failure[i] = k
        }
        var windows: [Int] = []
        var matched = 0
        var index = 0
        while index < file.count {
            if index & 4095 == 0 { try token?.check() }
            let hash = LineHash.of(file.key(index, pass))
            while matched > 0, hash != pattern[matched] { matched = failure[matched - 1] }
            if hash == pattern[matched] { matched += 1 }
            if matched == m {
                let start = index - m + 1
                if (0..<m).allSatisfy({ file.key(start + $0, pass).elementsEqual(key(search[$0])) }) {
                    windows.append(start)
                    matched = 0  // non-overlapping: start afresh after the window
                } else {
                    matched = failure[m - 1]
                }
            }
            index += 1
        }
        return windows
    }

    // MARK: Line endings

    /// The replacement with its line endings made the file's dominant one, when the
    /// replacement is consistent and the search does not insist on other endings.
    static func adaptEndings(_ replacement: [UInt8], _ lines: [TextLine], search: [TextLine], file: EndingCounts) -> [UInt8] {
        guard let own = lines.consistentEnding, file.any else { return replacement }
        if let searchEnding = search.consistentEnding, searchEnding != own { return replacement }
        let target = file.dominant
        guard own != target else { return replacement }
        return lines.map { line in TextLine(text: line.text, ending: line.ending.isEmpty ? [] : target) }.bytes
    }

    // MARK: Splicing

    /// The window rewritten: where search and replacement lines agree the file's bytes stay;
    /// other lines come from the replacement, re-indented to the file's unit and depth.
    static func splice(
        window: [TextLine], search: [TextLine], replacement: [TextLine], fileUnit: Indentation.Unit?, fileEnding: [UInt8]
    ) -> [TextLine] {
        guard !replacement.isEmpty else {
            // Everything removed; a search without its final newline leaves the file's.
            if let last = search.last, last.ending.isEmpty, let kept = window.last?.ending, !kept.isEmpty {
                return [TextLine(text: [], ending: kept)]
            }
            return []
        }
        let editUnit = Indentation.unit(of: search + replacement)
        let depthShift: Int = {
            guard let fileUnit, let editUnit, let w = window.first, let s = search.first else { return 0 }
            return Indentation.level(w, fileUnit).level - Indentation.level(s, editUnit).level
        }()
        let interiorEnding: [UInt8]? = replacement.consistentEnding != nil ? fileEnding : nil
        var out: [TextLine] = []
        for (index, line) in replacement.enumerated() {
            var text = line.text
            if index < search.count, search[index].text == line.text {
                text = window[index].text
            } else if let fileUnit, let editUnit {
                text = Indentation.reindent(line, from: editUnit, to: fileUnit, shift: depthShift)
            }
            var ending = line.ending
            let isLast = index == replacement.count - 1
            if isLast {
                let windowEnding = window.last?.ending ?? []
                if line.ending.isEmpty {
                    // No newline after the replacement: the file's stays unless the search
                    // took it (then the next line folds on, as in the exact pass).
                    ending = (search.last?.ending.isEmpty ?? true) ? windowEnding : []
                } else {
                    ending = windowEnding.isEmpty ? [] : windowEnding
                    if windowEnding.isEmpty && !(search.last?.ending.isEmpty ?? true) { ending = [] }
                }
            } else if let interiorEnding, !line.ending.isEmpty {
                ending = interiorEnding
            }
            out.append(TextLine(text: text, ending: ending))
        }
        return out
    }
}

/// Indentation units and levels: a tab, or a number of spaces (the GCD of the widths seen).
enum Indentation {
    enum Unit: Equatable, Sendable {
        case tab
        case spaces(Int)
    }

    static func unit(of lines: [TextLine]) -> Unit? {
        unit(ofIndentations: lines.lazy.filter { !$0.trimmedAll.isEmpty }.map { $0.indentation })
    }

    /// The unit of the given leading whitespace of non-blank lines.
    static func unit<S: Sequence>(ofIndentations indentations: S) -> Unit? where S.Element == ArraySlice<UInt8> {
        // The GCD of the widths seen, kept as it goes (no list of widths).
        var gcd: Int?
        for lead in indentations {
            if lead.contains(0x09) { return .tab }
            guard !lead.isEmpty else { continue }
            var (x, y) = (gcd ?? lead.count, lead.count)
            while y != 0 { (x, y) = (y, x % y) }
            gcd = x
        }
        return gcd.map { .spaces(max(1, $0)) }
    }

    /// The line's depth in `unit`, and spaces left over.
    static func level(_ line: TextLine, _ unit: Unit) -> (level: Int, extra: Int) {
        let lead = line.indentation
        let tabs = lead.filter { $0 == 0x09 }.count
        let spaces = lead.count - tabs
        switch unit {
        case .tab: return (tabs + spaces / 4, spaces % 4)
        case .spaces(let width): return ((spaces + tabs * width) / width, (spaces + tabs * width) % width)
        }
    }

    static func reindent(_ line: TextLine, from: Unit, to: Unit, shift: Int) -> [UInt8] {
        guard !line.trimmedAll.isEmpty else { return line.text }
        let (depth, extra) = level(line, from)
        let target = max(0, depth + shift)
        let body = line.text.dropFirst(line.indentation.count)
        switch to {
        case .tab: return [UInt8](repeating: 0x09, count: target) + [UInt8](repeating: 0x20, count: extra) + body
        case .spaces(let width): return [UInt8](repeating: 0x20, count: target * width + extra) + body
        }
    }
}
