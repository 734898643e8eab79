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

    static func apply(_ edit: Edit, to content: [UInt8], path: String) throws(Failure) -> [UInt8] {
        guard !edit.search.isEmpty else { throw Failure(message: "\(path): search string must not be empty") }
        let fileLines = TextLine.split(content)
        let searchLines = TextLine.split(edit.search)
        let replacementLines = TextLine.split(edit.replacement)
        let replacement = adaptEndings(edit.replacement, replacementLines, search: searchLines, file: fileLines)

        // Pass 1: the exact bytes.
        let hits = occurrences(of: edit.search, in: content)
        if hits.count == 1 || (edit.replaceAll && !hits.isEmpty) {
            var out: [UInt8] = []
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
        for pass in [Pass.trailingWhitespace, .allWhitespace] {
            let windows = matchingWindows(searchLines, in: fileLines, pass: pass)
            guard !windows.isEmpty else { continue }
            if windows.count > 1 && !edit.replaceAll {
                throw Failure(message: "\(path): search string matches \(windows.count) occurrences (expected exactly 1); add surrounding lines to make it unique, or set replace_all")
            }
            var lines = fileLines
            for start in windows.reversed() {
                let window = Array(lines[start..<(start + searchLines.count)])
                let spliced = splice(window: window, search: searchLines, replacement: replacementLines, file: fileLines)
                lines.replaceSubrange(start..<(start + searchLines.count), with: spliced)
            }
            return lines.bytes
        }
        throw Failure(message: "\(path): search string not found in file")
    }

    // MARK: Matching

    enum Pass { case trailingWhitespace, allWhitespace }

    /// Non-overlapping exact occurrences, in order.
    static func occurrences(of needle: [UInt8], in haystack: [UInt8]) -> [Int] {
        guard needle.count <= haystack.count else { return [] }
        var hits: [Int] = []
        var index = 0
        let first = needle[0]
        while index <= haystack.count - needle.count {
            if haystack[index] == first, haystack[index..<(index + needle.count)].elementsEqual(needle) {
                hits.append(index)
                index += needle.count
            } else {
                index += 1
            }
        }
        return hits
    }

    /// Start indices of non-overlapping windows of file lines matching the search lines.
    static func matchingWindows(_ search: [TextLine], in file: [TextLine], pass: Pass) -> [Int] {
        guard !search.isEmpty, search.count <= file.count else { return [] }
        var windows: [Int] = []
        var start = 0
        while start + search.count <= file.count {
            var matched = true
            for offset in search.indices {
                let f = file[start + offset]
                let s = search[offset]
                let same = pass == .trailingWhitespace ? f.trimmedTrailing == s.trimmedTrailing : f.trimmedAll == s.trimmedAll
                if !same || !endingsMatch(f.ending, s.ending) {
                    matched = false
                    break
                }
            }
            if matched {
                windows.append(start)
                start += search.count
            } else {
                start += 1
            }
        }
        return windows
    }

    /// Equal, `\n` and `\r\n`, or either at the end of the text.
    static func endingsMatch(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a == b || a.isEmpty || b.isEmpty || (a.last == 0x0A && b.last == 0x0A)
    }

    // MARK: Line endings

    /// The replacement with its line endings made the file's dominant one, when the
    /// replacement is consistent and the search does not insist on other endings.
    static func adaptEndings(_ replacement: [UInt8], _ lines: [TextLine], search: [TextLine], file: [TextLine]) -> [UInt8] {
        guard let own = lines.consistentEnding, file.contains(where: { !$0.ending.isEmpty }) else { return replacement }
        if let searchEnding = search.consistentEnding, searchEnding != own { return replacement }
        let target = file.dominantEnding
        guard own != target else { return replacement }
        return lines.map { line in TextLine(text: line.text, ending: line.ending.isEmpty ? [] : target) }.bytes
    }

    // MARK: Splicing

    /// The window rewritten: where search and replacement lines agree the file's bytes stay;
    /// other lines come from the replacement, re-indented to the file's unit and depth.
    static func splice(window: [TextLine], search: [TextLine], replacement: [TextLine], file: [TextLine]) -> [TextLine] {
        guard !replacement.isEmpty else {
            // Everything removed; a search without its final newline leaves the file's.
            if let last = search.last, last.ending.isEmpty, let kept = window.last?.ending, !kept.isEmpty {
                return [TextLine(text: [], ending: kept)]
            }
            return []
        }
        let fileUnit = Indentation.unit(of: window) ?? Indentation.unit(of: file)
        let editUnit = Indentation.unit(of: search + replacement)
        let depthShift: Int = {
            guard let fileUnit, let editUnit, let w = window.first, let s = search.first else { return 0 }
            return Indentation.level(w, fileUnit).level - Indentation.level(s, editUnit).level
        }()
        let interiorEnding: [UInt8]? = replacement.consistentEnding != nil ? file.dominantEnding : nil
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
        var widths: [Int] = []
        for line in lines where !line.trimmedAll.isEmpty {
            let lead = line.indentation
            if lead.contains(0x09) { return .tab }
            if !lead.isEmpty { widths.append(lead.count) }
        }
        guard let first = widths.first else { return nil }
        let gcd = widths.reduce(first) { a, b in
            var (x, y) = (a, b)
            while y != 0 { (x, y) = (y, x % y) }
            return x
        }
        return .spaces(max(1, gcd))
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
