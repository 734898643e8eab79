/// Parsed regular expression tree. `height` is tracked so nesting can be capped at
/// `RegexNode.maxHeight` (as RE2 / Go do), which bounds recursion in the compiler.
struct RegexNode: Sendable {
    enum Kind: Sendable, Equatable {
        case empty
        /// One scalar, matched exactly.
        case literal(UInt32)
        /// Index into the parser's class table.
        case charClass(Int)
        case anyChar
        case anyCharNotNL
        case assertion(Assertion)
        case concat
        case alternate
        case star
        case plus
        case quest
        /// `{min,max}`; `max == -1` means unbounded.
        case `repeat`(min: Int, max: Int)
    }

    static let maxHeight = 1000

    var kind: Kind
    var subs: [RegexNode]
    var height: Int

    init(_ kind: Kind) {
        self.kind = kind
        self.subs = []
        self.height = 1
    }

    init(_ kind: Kind, subs: [RegexNode]) throws(LineRegexError) {
        self.kind = kind
        self.subs = subs
        var h = 0
        for sub in subs where sub.height > h { h = sub.height }
        self.height = h + 1
        if height > RegexNode.maxHeight {
            throw LineRegexError.make("expression nests too deeply")
        }
    }
}
