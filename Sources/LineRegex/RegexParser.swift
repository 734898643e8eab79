/// Parses RE2 / Go `regexp/syntax` patterns into a `RegexNode` tree without recursion:
/// open groups live on an explicit stack (capped at `maxGroupDepth`), so hostile
/// patterns cannot exhaust the call stack.
struct RegexParser {
    struct Flags: Equatable {
        var foldCase = false
        var dotNL = false
        var multiLine = false
        var ungreedy = false
    }

    /// One open group: completed alternatives plus the concatenation being built.
    private struct Frame {
        var alternatives: [RegexNode] = []
        var items: [RegexNode] = []
        var savedFlags: Flags
    }

    static let maxGroupDepth = 1000

    private let p: [UInt8]
    private var i = 0
    private var flags = Flags()
    private var names: Set<[UInt8]> = []
    private var foldedLiteralClass: [UInt32: Int] = [:]
    /// Classes referenced by `.charClass(index)` nodes.
    private(set) var classes: [CharClass] = []

    init(_ pattern: [UInt8]) {
        self.p = pattern
    }

    // MARK: - Errors

    private func fragment(_ start: Int, _ end: Int) -> [UInt8] {
        let s = max(0, min(start, p.count))
        let e = max(s, min(end, p.count))
        return Array(p[s..<e])
    }

    private func error(_ code: String, _ start: Int, _ end: Int) -> LineRegexError {
        LineRegexError.make(code, fragment(start, end), offset: start)
    }

    private func at(_ k: Int) -> UInt8? {
        k < p.count ? p[k] : nil
    }

    // MARK: - Top level

    mutating func parse() throws(LineRegexError) -> RegexNode {
        var stack: [Frame] = [Frame(savedFlags: flags)]
        var lastRepeatStart: Int? = nil
        while i < p.count {
            let c = p[i]
            var repeatStart: Int? = nil
            switch c {
            case UInt8(ascii: "("):
                if stack.count > RegexParser.maxGroupDepth {
                    throw LineRegexError.make("expression nests too deeply", offset: i)
                }
                if at(i + 1) == UInt8(ascii: "?") {
                    let saved = flags
                    if try parsePerlGroup() {
                        stack.append(Frame(savedFlags: saved))
                    }
                } else {
                    i += 1
                    stack.append(Frame(savedFlags: flags))
                }
            case UInt8(ascii: ")"):
                guard stack.count > 1 else { throw error("unexpected )", 0, p.count) }
                let frame = stack.removeLast()
                let node = try RegexParser.finish(frame)
                flags = frame.savedFlags
                stack[stack.count - 1].items.append(node)
                i += 1
            case UInt8(ascii: "|"):
                let concat = try RegexParser.makeConcat(stack[stack.count - 1].items)
                stack[stack.count - 1].alternatives.append(concat)
                stack[stack.count - 1].items.removeAll()
                i += 1
            case UInt8(ascii: "^"):
                stack[stack.count - 1].items.append(RegexNode(.assertion(flags.multiLine ? .beginLine : .beginText)))
                i += 1
            case UInt8(ascii: "$"):
                stack[stack.count - 1].items.append(RegexNode(.assertion(flags.multiLine ? .endLine : .endText)))
                i += 1
            case UInt8(ascii: "."):
                stack[stack.count - 1].items.append(RegexNode(flags.dotNL ? .anyChar : .anyCharNotNL))
                i += 1
            case UInt8(ascii: "["):
                let node = try parseClass()
                stack[stack.count - 1].items.append(node)
            case UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "?"):
                let opStart = i
                i += 1
                if at(i) == UInt8(ascii: "?") { i += 1 }  // lazy form: same language
                if let prev = lastRepeatStart {
                    throw error("invalid nested repetition operator", prev, i)
                }
                let kind: RegexNode.Kind = c == UInt8(ascii: "*") ? .star : c == UInt8(ascii: "+") ? .plus : .quest
                try applyRepeat(kind, &stack[stack.count - 1].items, opStart)
                repeatStart = opStart
            case UInt8(ascii: "{"):
                let opStart = i
                if let (minCount, maxCount, end) = parseRepeatBraces(i) {
                    i = end
                    if at(i) == UInt8(ascii: "?") { i += 1 }
                    if let prev = lastRepeatStart {
                        throw error("invalid nested repetition operator", prev, i)
                    }
                    if minCount > 1000 || maxCount > 1000 || (maxCount >= 0 && minCount > maxCount) {
                        throw error("invalid repeat count", opStart, end)
                    }
                    try applyRepeat(.repeat(min: minCount, max: maxCount), &stack[stack.count - 1].items, opStart)
                    repeatStart = opStart
                } else {
                    stack[stack.count - 1].items.append(literalNode(UInt32(c)))
                    i += 1
                }
            case UInt8(ascii: "\\"):
                try parseBackslash(&stack[stack.count - 1].items)
            default:
                let (scalar, width) = UTF8Decoding.decode(p, i)
                i += width
                stack[stack.count - 1].items.append(literalNode(scalar))
            }
            lastRepeatStart = repeatStart
        }
        if stack.count > 1 {
            throw error("missing closing )", 0, p.count)
        }
        return try RegexParser.finish(stack[0])
    }

    private static func makeConcat(_ items: [RegexNode]) throws(LineRegexError) -> RegexNode {
        switch items.count {
        case 0: return RegexNode(.empty)
        case 1: return items[0]
        default: return try RegexNode(.concat, subs: items)
        }
    }

    private static func finish(_ frame: Frame) throws(LineRegexError) -> RegexNode {
        var alternatives = frame.alternatives
        alternatives.append(try makeConcat(frame.items))
        if alternatives.count == 1 { return alternatives[0] }
        return try RegexNode(.alternate, subs: alternatives)
    }

    private func applyRepeat(_ kind: RegexNode.Kind, _ items: inout [RegexNode], _ opStart: Int) throws(LineRegexError) {
        guard let last = items.popLast() else {
            throw error("missing argument to repetition operator", opStart, i)
        }
        items.append(try RegexNode(kind, subs: [last]))
    }

    /// Parses `{n}`, `{n,}` or `{n,m}` at `start`; nil means "not a repeat, treat `{` literally".
    private func parseRepeatBraces(_ start: Int) -> (Int, Int, Int)? {
        var j = start + 1
        func number(_ j: inout Int) -> Int? {
            let begin = j
            while let d = at(j), d >= UInt8(ascii: "0"), d <= UInt8(ascii: "9") { j += 1 }
            if j == begin { return nil }
            if j - begin >= 2 && p[begin] == UInt8(ascii: "0") { return nil }  // no leading zeros, as Go
            if j - begin > 8 { return 100_000_000 }  // too big: reported as invalid repeat count
            var v = 0
            for k in begin..<j { v = v * 10 + Int(p[k] - UInt8(ascii: "0")) }
            return v
        }
        guard let minCount = number(&j) else { return nil }
        var maxCount = minCount
        if at(j) == UInt8(ascii: ",") {
            j += 1
            if at(j) == UInt8(ascii: "}") {
                maxCount = -1
            } else {
                guard let m = number(&j) else { return nil }
                maxCount = m
            }
        }
        guard at(j) == UInt8(ascii: "}") else { return nil }
        return (minCount, maxCount, j + 1)
    }

    // MARK: - Groups and flags

    /// Parses `(?...`; returns true when a new group was opened (false for a bare flag change).
    private mutating func parsePerlGroup() throws(LineRegexError) -> Bool {
        let start = i
        var j = i + 2
        guard let c = at(j) else {
            throw error("missing closing )", 0, p.count)
        }
        if c == UInt8(ascii: "=") || c == UInt8(ascii: "!") || (c == UInt8(ascii: "<") && (at(j + 1) == UInt8(ascii: "=") || at(j + 1) == UInt8(ascii: "!"))) {
            throw error("lookaround is not supported (RE2 syntax)", start, min(p.count, j + (c == UInt8(ascii: "<") ? 2 : 1)))
        }
        if c == UInt8(ascii: "P") && at(j + 1) == UInt8(ascii: "=") {
            throw error("backreferences are not supported (RE2 syntax)", start, j + 2)
        }
        if (c == UInt8(ascii: "P") && at(j + 1) == UInt8(ascii: "<")) || c == UInt8(ascii: "<") {
            let nameStart = c == UInt8(ascii: "<") ? j + 1 : j + 2
            var k = nameStart
            while let b = at(k), b != UInt8(ascii: ">") { k += 1 }
            guard k < p.count else {
                throw error("invalid named capture", start, p.count)
            }
            let name = Array(p[nameStart..<k])
            let valid = !name.isEmpty && name.allSatisfy { RegexParser.isWordByte($0) }
            guard valid else { throw error("invalid named capture", start, k + 1) }
            guard names.insert(name).inserted else {
                throw error("duplicate capture group name", start, k + 1)
            }
            i = k + 1
            return true
        }
        var newFlags = flags
        var negate = false
        var sawFlagAfterNegate = false
        while let b = at(j) {
            switch b {
            case UInt8(ascii: "i"), UInt8(ascii: "m"), UInt8(ascii: "s"), UInt8(ascii: "U"):
                let on = !negate
                switch b {
                case UInt8(ascii: "i"): newFlags.foldCase = on
                case UInt8(ascii: "m"): newFlags.multiLine = on
                case UInt8(ascii: "s"): newFlags.dotNL = on
                default: newFlags.ungreedy = on
                }
                if negate { sawFlagAfterNegate = true }
            case UInt8(ascii: "-"):
                if negate { throw error("invalid or unsupported Perl syntax", start, j + 1) }
                negate = true
            case UInt8(ascii: ":"), UInt8(ascii: ")"):
                if negate && !sawFlagAfterNegate {
                    throw error("invalid or unsupported Perl syntax", start, j + 1)
                }
                flags = newFlags
                i = j + 1
                return b == UInt8(ascii: ":")
            default:
                let (_, w) = UTF8Decoding.decode(p, j)
                throw error("invalid or unsupported Perl syntax", start, j + w)
            }
            j += 1
        }
        throw error("missing closing )", 0, p.count)
    }

    static func isWordByte(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z")) || b == UInt8(ascii: "_")
    }

    // MARK: - Literals and classes

    private mutating func literalNode(_ scalar: UInt32) -> RegexNode {
        guard flags.foldCase, let orbit = CaseFolding.orbit(scalar) else {
            return RegexNode(.literal(scalar))
        }
        if let index = foldedLiteralClass[scalar] { return RegexNode(.charClass(index)) }
        var flat: [UInt32] = []
        for member in orbit { flat.append(member); flat.append(member) }
        classes.append(CharClass(ranges: flat))
        foldedLiteralClass[scalar] = classes.count - 1
        return RegexNode(.charClass(classes.count - 1))
    }

    private mutating func classNode(_ ranges: [UInt32], _ categories: [CharClass.CategoryTest], negated: Bool) -> RegexNode {
        var normalized = CharClass.normalize(ranges)
        if flags.foldCase { normalized = CharClass.fold(normalized) }
        classes.append(
            CharClass(
                ranges: normalized, categories: categories,
                foldCategories: flags.foldCase && !categories.isEmpty, negated: negated))
        return RegexNode(.charClass(classes.count - 1))
    }

    private static let digitRanges: [UInt32] = [0x30, 0x39]
    private static let spaceRanges: [UInt32] = [0x09, 0x0A, 0x0C, 0x0D, 0x20, 0x20]
    private static let wordRanges: [UInt32] = [0x30, 0x39, 0x41, 0x5A, 0x5F, 0x5F, 0x61, 0x7A]

    private static let posixClasses: [String: [UInt32]] = [
        "alnum": [0x30, 0x39, 0x41, 0x5A, 0x61, 0x7A],
        "alpha": [0x41, 0x5A, 0x61, 0x7A],
        "ascii": [0x00, 0x7F],
        "blank": [0x09, 0x09, 0x20, 0x20],
        "cntrl": [0x00, 0x1F, 0x7F, 0x7F],
        "digit": [0x30, 0x39],
        "graph": [0x21, 0x7E],
        "lower": [0x61, 0x7A],
        "print": [0x20, 0x7E],
        "punct": [0x21, 0x2F, 0x3A, 0x40, 0x5B, 0x60, 0x7B, 0x7E],
        "space": [0x09, 0x0D, 0x20, 0x20],
        "upper": [0x41, 0x5A],
        "word": [0x30, 0x39, 0x41, 0x5A, 0x5F, 0x5F, 0x61, 0x7A],
        "xdigit": [0x30, 0x39, 0x41, 0x46, 0x61, 0x66],
    ]

    /// Ranges for a (possibly negated) named ASCII class, folded first when `(?i)` is on, as Go does.
    private func namedRanges(_ positive: [UInt32], negated: Bool) -> [UInt32] {
        var r = CharClass.normalize(positive)
        if flags.foldCase { r = CharClass.fold(r) }
        return negated ? CharClass.complement(r) : r
    }

    private func perlClassRanges(_ letter: UInt8) -> [UInt32]? {
        switch letter {
        case UInt8(ascii: "d"): return namedRanges(RegexParser.digitRanges, negated: false)
        case UInt8(ascii: "D"): return namedRanges(RegexParser.digitRanges, negated: true)
        case UInt8(ascii: "s"): return namedRanges(RegexParser.spaceRanges, negated: false)
        case UInt8(ascii: "S"): return namedRanges(RegexParser.spaceRanges, negated: true)
        case UInt8(ascii: "w"): return namedRanges(RegexParser.wordRanges, negated: false)
        case UInt8(ascii: "W"): return namedRanges(RegexParser.wordRanges, negated: true)
        default: return nil
        }
    }

    /// What `\p{Name}` names: a general category (tested at match time) or a script's
    /// ranges (negated and case-folded already, as the flags say).
    private enum UnicodeClass {
        case category(CharClass.CategoryTest)
        case ranges([UInt32])
    }

    /// Parses `\pX`, `\p{Name}`, `\P{Name}`, `\p{^Name}` with `i` at the backslash.
    private mutating func parseUnicodeClass() throws(LineRegexError) -> UnicodeClass {
        let start = i
        var negated = p[i + 1] == UInt8(ascii: "P")
        var j = i + 2
        var name: [UInt8]
        guard let c = at(j) else { throw error("invalid character class range", start, p.count) }
        if c == UInt8(ascii: "{") {
            var k = j + 1
            while let b = at(k), b != UInt8(ascii: "}") { k += 1 }
            guard k < p.count else { throw error("invalid character class range", start, p.count) }
            name = Array(p[(j + 1)..<k])
            j = k + 1
        } else {
            let (_, w) = UTF8Decoding.decode(p, j)
            name = Array(p[j..<(j + w)])
            j += w
        }
        if name.first == UInt8(ascii: "^") {
            negated.toggle()
            name.removeFirst()
        }
        let text = String(decoding: name, as: UTF8.self)
        if let mask = GeneralCategoryName.mask(for: text) {
            i = j
            return .category(CharClass.CategoryTest(mask: mask, negated: negated))
        }
        guard let script = UnicodeScriptName.ranges(named: text) else { throw error("invalid character class range", start, j) }
        i = j
        return .ranges(namedRanges(script, negated: negated))
    }

    /// Parses `[...]` with `i` at the opening bracket.
    private mutating func parseClass() throws(LineRegexError) -> RegexNode {
        let start = i
        i += 1
        var negated = false
        if at(i) == UInt8(ascii: "^") {
            negated = true
            i += 1
        }
        var ranges: [UInt32] = []
        var categories: [CharClass.CategoryTest] = []
        var first = true
        while true {
            guard let c = at(i) else { throw error("missing closing ]", start, p.count) }
            if c == UInt8(ascii: "]") && !first {
                i += 1
                break
            }
            first = false
            if c == UInt8(ascii: "["), at(i + 1) == UInt8(ascii: ":"), let posix = try parsePOSIXClass() {
                ranges.append(contentsOf: posix)
                continue
            }
            if c == UInt8(ascii: "\\"), let next = at(i + 1) {
                if let perl = perlClassRanges(next) {
                    ranges.append(contentsOf: perl)
                    i += 2
                    continue
                }
                if next == UInt8(ascii: "p") || next == UInt8(ascii: "P") {
                    switch try parseUnicodeClass() {
                    case .category(let test): categories.append(test)
                    case .ranges(let script): ranges.append(contentsOf: script)
                    }
                    continue
                }
            }
            let loStart = i
            let lo = try parseClassChar(classStart: start)
            var hi = lo
            if at(i) == UInt8(ascii: "-"), let after = at(i + 1), after != UInt8(ascii: "]") {
                i += 1
                hi = try parseClassChar(classStart: start)
                if hi < lo { throw error("invalid character class range", loStart, i) }
            }
            ranges.append(lo)
            ranges.append(hi)
        }
        return classNode(ranges, categories, negated: negated)
    }

    /// Parses `[:name:]` / `[:^name:]` at `i`; nil if there is no closing `:]` (then `[` is literal).
    private mutating func parsePOSIXClass() throws(LineRegexError) -> [UInt32]? {
        var k = i + 2
        while k + 1 < p.count && !(p[k] == UInt8(ascii: ":") && p[k + 1] == UInt8(ascii: "]")) { k += 1 }
        guard k + 1 < p.count else { return nil }
        var name = Array(p[(i + 2)..<k])
        var negated = false
        if name.first == UInt8(ascii: "^") {
            negated = true
            name.removeFirst()
        }
        guard let positive = RegexParser.posixClasses[String(decoding: name, as: UTF8.self)] else {
            throw error("invalid character class range", i, k + 2)
        }
        i = k + 2
        return namedRanges(positive, negated: negated)
    }

    private mutating func parseClassChar(classStart: Int) throws(LineRegexError) -> UInt32 {
        guard let c = at(i) else { throw error("missing closing ]", classStart, p.count) }
        if c == UInt8(ascii: "\\") { return try parseEscape() }
        let (scalar, width) = UTF8Decoding.decode(p, i)
        i += width
        return scalar
    }

    // MARK: - Escapes

    /// Handles a backslash outside classes: assertions, Perl/Unicode classes, `\Q...\E`, literals.
    private mutating func parseBackslash(_ items: inout [RegexNode]) throws(LineRegexError) {
        guard let c = at(i + 1) else {
            throw error("trailing backslash at end of expression", i, p.count)
        }
        switch c {
        case UInt8(ascii: "A"): items.append(RegexNode(.assertion(.beginText))); i += 2
        case UInt8(ascii: "z"): items.append(RegexNode(.assertion(.endText))); i += 2
        case UInt8(ascii: "b"): items.append(RegexNode(.assertion(.wordBoundary))); i += 2
        case UInt8(ascii: "B"): items.append(RegexNode(.assertion(.notWordBoundary))); i += 2
        case UInt8(ascii: "Q"):
            var k = i + 2
            while k < p.count && !(p[k] == UInt8(ascii: "\\") && at(k + 1) == UInt8(ascii: "E")) {
                let (scalar, width) = UTF8Decoding.decode(p, k)
                items.append(literalNode(scalar))
                k += width
            }
            i = k < p.count ? k + 2 : k
        case UInt8(ascii: "p"), UInt8(ascii: "P"):
            switch try parseUnicodeClass() {
            case .category(let test): items.append(classNode([], [test], negated: false))
            case .ranges(let script): items.append(classNode(script, [], negated: false))
            }
        default:
            if let ranges = perlClassRanges(c) {
                i += 2
                items.append(classNode(ranges, [], negated: false))
            } else {
                items.append(literalNode(try parseEscape()))
            }
        }
    }

    private static func octal(_ b: UInt8?) -> UInt32? {
        guard let b, b >= UInt8(ascii: "0"), b <= UInt8(ascii: "7") else { return nil }
        return UInt32(b - UInt8(ascii: "0"))
    }

    private static func hex(_ b: UInt8?) -> UInt32? {
        guard let b else { return nil }
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(b - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(b - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt32(b - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }

    /// Parses a single-scalar escape with `i` at the backslash (Go's `parseEscape`).
    private mutating func parseEscape() throws(LineRegexError) -> UInt32 {
        let start = i
        guard let c = at(i + 1) else {
            throw error("trailing backslash at end of expression", i, p.count)
        }
        var j = i + 2
        switch c {
        case UInt8(ascii: "1")...UInt8(ascii: "9"):
            // A lone digit is a backreference; `\12` etc. are octal escapes (as in Go).
            if c <= UInt8(ascii: "7"), RegexParser.octal(at(j)) != nil {
                fallthrough
            }
            throw error("backreferences are not supported (RE2 syntax)", start, j)
        case UInt8(ascii: "0"):
            var value = UInt32(c - UInt8(ascii: "0"))
            for _ in 0..<2 {
                guard let d = RegexParser.octal(at(j)) else { break }
                value = value * 8 + d
                j += 1
            }
            i = j
            return value
        case UInt8(ascii: "x"):
            if at(j) == UInt8(ascii: "{") {
                j += 1
                var value: UInt32 = 0
                var digits = 0
                while let d = RegexParser.hex(at(j)) {
                    value = value * 16 + d
                    digits += 1
                    j += 1
                    if value > 0x10FFFF { break }
                }
                guard digits > 0, value <= 0x10FFFF, at(j) == UInt8(ascii: "}") else {
                    throw error("invalid escape sequence", start, min(p.count, j + 1))
                }
                i = j + 1
                return value
            }
            guard let h = RegexParser.hex(at(j)), let l = RegexParser.hex(at(j + 1)) else {
                throw error("invalid escape sequence", start, min(p.count, j + 2))
            }
            i = j + 2
            return h * 16 + l
        case UInt8(ascii: "a"): i = j; return 7
        case UInt8(ascii: "f"): i = j; return 12
        case UInt8(ascii: "n"): i = j; return 10
        case UInt8(ascii: "r"): i = j; return 13
        case UInt8(ascii: "t"): i = j; return 9
        case UInt8(ascii: "v"): i = j; return 11
        default:
            if c < 0x80 && !RegexParser.isAlnum(c) {
                i = j
                return UInt32(c)
            }
            let (_, w) = UTF8Decoding.decode(p, i + 1)
            j = i + 1 + w
            throw error("invalid escape sequence", start, j)
        }
    }

    private static func isAlnum(_ b: UInt8) -> Bool {
        isWordByte(b) && b != UInt8(ascii: "_")
    }
}
