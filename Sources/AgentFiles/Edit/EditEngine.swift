import AgentCore
import CAgentSpawn

#if canImport(Glibc)
import Glibc
#endif

/// Applies one search/replace edit to a file's bytes: an
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

    /// The most an edit's result may hold (the file it reads is at most 64 MiB; each edit
    /// of a request starts from the previous result).
    static let maxResultBytes = 128 << 20

    static func tooLarge(_ path: String) -> Failure {
        Failure(message: "\(path): the edit would make the file larger than \(maxResultBytes) bytes, the most an edit may write")
    }

    /// Matching costs time linear in the file and the search (the exact pass with
    /// `memmem`, the line passes with KMP over per-line hashes); memory is the file, the
    /// result and 32 bytes per file line. `token` is checked every few thousand lines.
    static func apply(_ edit: Edit, to content: [UInt8], path: String, token: CancelToken? = nil) throws -> [UInt8] {
        guard !edit.search.isEmpty else { throw Failure(message: "\(path): search string must not be empty") }
        let searchLines = TextLine.split(edit.search)
        let replacementLines = TextLine.split(edit.replacement)
        let endings = EndingCounts(content)
        // A replacement whose interior lines share one ending is spliced with the file's
        // dominant ending instead, unless the search's interior ending differs from the
        // replacement's: then the caller means to change endings, and only the exact
        // pass may match.
        let searchEnding = searchLines.interiorEnding
        let replacementEnding = replacementLines.interiorEnding
        let forcedEnding = replacementEnding.map { _ in endings.dominant }
        let rewritesEndings = searchEnding != nil && replacementEnding != nil && searchEnding != replacementEnding
        var replacement = edit.replacement
        if let forcedEnding, !rewritesEndings, replacementEnding != forcedEnding {
            replacement = replacementLines.withInteriorEnding(forcedEnding)
        }

        // Pass 1: the exact bytes.
        let hits = try occurrences(of: edit.search, in: content, token: token)
        if hits.count == 1 || (edit.replaceAll && !hits.isEmpty) {
            // The result's size before it is built: many hits of a short search with a long
            // replacement would otherwise ask for gigabytes at once.
            let (growth, overflow) = hits.count.multipliedReportingOverflow(by: max(0, replacement.count - edit.search.count))
            guard !overflow, growth <= maxResultBytes - content.count else { throw tooLarge(path) }
            var out: [UInt8] = []
            out.reserveCapacity(content.count + growth)
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
        if rewritesEndings { throw Failure(message: "\(path): search string not found in file") }
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
                let unit: Indentation.Unit? =
                    Indentation.unit(of: window)
                    ?? {
                        if fileUnit == nil { fileUnit = .some(file.indentationUnit()) }
                        return fileUnit!
                    }()
                out += content[position..<file.spans[start].start]
                out += splice(window: window, search: searchLines, replacement: replacementLines, fileUnit: unit, forcedEnding: forcedEnding)
                if out.count > maxResultBytes { throw tooLarge(path) }
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

    // MARK: Splicing

    /// The window rewritten line by line, as the reference splices: the
    /// search and replacement lines that agree (whitespace aside) at the start and at the
    /// end pair up, the lines between pair by position, and replacement lines beyond are
    /// inserted. For each paired line, part by part (lead, trail, ending), where search and
    /// replacement agree the file's bytes stay, otherwise the replacement's win; the body is
    /// the replacement's. An inserted line is indented at its depth relative to its
    /// neighbour, in the file's unit (tab or a number of spaces). A missing final newline
    /// stays missing; otherwise the splice ends with one, so the next line never folds on.
    static func splice(
        window: [TextLine], search: [TextLine], replacement: [TextLine], fileUnit: Indentation.Unit?, forcedEnding: [UInt8]?
    ) -> [UInt8] {
        guard !replacement.isEmpty else { return [] }
        let atEndWithoutNewline = window.last?.ending.isEmpty ?? false
        let (prefix, suffix) = agreeingEnds(search, replacement)
        let searchUnit = Indentation.unit(of: search + replacement)
        let last = replacement.count - 1
        var out: [UInt8] = []
        for (index, line) in replacement.enumerated() {
            let (reference, inserted) = pairing(index, line, prefix: prefix, suffix: suffix, search: search, replacement: replacement)
            let s = search[reference].parts
            let r = line.parts
            let f = window[reference].parts
            var lead = r.lead
            var trail = r.trail
            if r.body.isEmpty {
                // A body-less line keeps the replacement's whitespace as written.
            } else if inserted {
                lead = f.lead
                if let searchUnit, let fileUnit,
                    let translated = Indentation.translate(r.lead, search: s.lead, file: f.lead, from: searchUnit, to: fileUnit)
                {
                    lead = translated[...]
                }
            } else {
                if s.lead.elementsEqual(r.lead) { lead = f.lead }
                if s.trail.elementsEqual(r.trail) { trail = f.trail }
            }
            var ending = line.ending
            if !inserted, TextLine.sameEndingShape(search[reference].ending, line.ending) {
                let fileEnding = window[reference].ending
                // Only the last line may take over a missing ending.
                if !(fileEnding.isEmpty && index < last) { ending = fileEnding }
            }
            if inserted, index == last, atEndWithoutNewline { ending = [] }
            if let forcedEnding, index < last || !atEndWithoutNewline { ending = forcedEnding }
            // A replacement ending without a newline keeps the matched lines' last one when the
            // search ended without one too (they agree); a search that ended with a newline
            // the replacement dropped folds the next line on, as an exact match does.
            if index == last, !atEndWithoutNewline, ending.isEmpty, search.last?.ending.isEmpty ?? true {
                ending = forcedEnding ?? TextLine.lf
            }
            out += lead
            out += r.body
            out += trail
            out += ending
        }
        return out
    }

    /// How many lines at the start and at the end of search and replacement agree when
    /// all surrounding whitespace is ignored (the ends never overlap).
    static func agreeingEnds(_ search: [TextLine], _ replacement: [TextLine]) -> (prefix: Int, suffix: Int) {
        let shorter = min(search.count, replacement.count)
        var prefix = 0
        while prefix < shorter, search[prefix].trimmedAll.elementsEqual(replacement[prefix].trimmedAll) { prefix += 1 }
        var suffix = 0
        while suffix < shorter - prefix,
            search[search.count - 1 - suffix].trimmedAll.elementsEqual(replacement[replacement.count - 1 - suffix].trimmedAll)
        {
            suffix += 1
        }
        return (prefix, suffix)
    }

    /// The search (and window) line a replacement line pairs with, and whether it is an
    /// insertion. An insertion refers to the line of the scope its indentation says it
    /// belongs to: the agreeing end after it, else the one before it.
    static func pairing(
        _ index: Int, _ line: TextLine, prefix: Int, suffix: Int, search: [TextLine], replacement: [TextLine]
    ) -> (reference: Int, inserted: Bool) {
        if index < prefix { return (index, false) }
        if index >= replacement.count - suffix { return (index - (replacement.count - search.count), false) }
        if index - prefix < search.count - prefix - suffix { return (index, false) }
        let afterIt = search.count - suffix
        switch (prefix > 0, suffix > 0) {
        case (true, true):
            let lead = line.indentation
            let sameAsAfter = lead.elementsEqual(replacement[replacement.count - suffix].indentation)
            let sameAsBefore = lead.elementsEqual(replacement[prefix - 1].indentation)
            return (!sameAsAfter && sameAsBefore ? prefix - 1 : afterIt, true)
        case (false, true): return (afterIt, true)
        case (true, false): return (prefix - 1, true)
        case (false, false): return (min(index, search.count - 1), true)
        }
    }
}

/// Indentation units and levels: a tab, or a number of spaces (the GCD of the widths seen).
enum Indentation {
    enum Unit: Equatable, Sendable {
        case tab
        case spaces(Int)
    }

    /// The unit of the lines that have a body; nil when none is indented or they mix tabs
    /// and spaces.
    static func unit(of lines: [TextLine]) -> Unit? {
        unit(ofIndentations: lines.lazy.filter { !$0.parts.body.isEmpty }.map { $0.indentation })
    }

    /// The unit of the given leading whitespace (of lines with a body): a tab when every
    /// indented line uses tabs only, the GCD of the widths when all use spaces only, nil
    /// otherwise. Kept as it goes (no list of widths).
    static func unit<S: Sequence>(ofIndentations indentations: S) -> Unit? where S.Element == ArraySlice<UInt8> {
        var tabs = false
        var gcd = 0
        for lead in indentations where !lead.isEmpty {
            let hasTab = lead.contains(0x09)
            if hasTab && lead.contains(0x20) { return nil }
            if hasTab {
                tabs = true
            } else {
                var (x, y) = (gcd, lead.count)
                while y != 0 { (x, y) = (y, x % y) }
                gcd = x
            }
        }
        if tabs { return gcd == 0 ? .tab : nil }
        return gcd > 0 ? .spaces(gcd) : nil
    }

    /// The depth of `lead` in whole units, nil when it is not made of them.
    static func level(_ lead: ArraySlice<UInt8>, _ unit: Unit) -> Int? {
        switch unit {
        case .tab: return lead.allSatisfy { $0 == 0x09 } ? lead.count : nil
        case .spaces(let width): return lead.allSatisfy { $0 == 0x20 } && lead.count % width == 0 ? lead.count / width : nil
        }
    }

    /// An inserted line's lead in the file: the file line's depth plus how much deeper the
    /// replacement line is than its search line, in the file's unit; nil when a lead is
    /// not whole units or the depth would be negative.
    static func translate(
        _ replacement: ArraySlice<UInt8>, search: ArraySlice<UInt8>, file: ArraySlice<UInt8>, from: Unit, to: Unit
    ) -> [UInt8]? {
        guard let depth = level(replacement, from), let base = level(search, from), let fileBase = level(file, to) else { return nil }
        let target = fileBase + depth - base
        guard target >= 0 else { return nil }
        // Never longer than the two leads together (a client's lead of many spaces over a
        // file unit of many spaces would otherwise ask for their product).
        let bound = replacement.count + file.count
        switch to {
        case .tab: return target <= bound ? [UInt8](repeating: 0x09, count: target) : nil
        case .spaces(let width):
            let (count, overflow) = target.multipliedReportingOverflow(by: width)
            return !overflow && count <= bound ? [UInt8](repeating: 0x20, count: count) : nil
        }
    }
}
