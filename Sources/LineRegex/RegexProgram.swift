/// A compiled Thompson NFA: a flat instruction array executed by the Pike VM in `PikeVM.swift`.
struct RegexProgram: Sendable {
    enum Op: UInt8, Sendable {
        case fail, match, nop, split, assertion, scalar, charClass, anyChar, anyCharNotNL
    }

    /// One instruction. `out` is the next pc; `split` also branches to `arg`.
    /// `arg` holds the scalar, class index or `Assertion` raw value for the other ops.
    struct Inst: Sendable {
        var op: Op
        var out: UInt32
        var arg: UInt32
    }

    var insts: [Inst]
    var start: UInt32
    var classes: [CharClass]
    /// The pattern can only match at offset 0 (it begins with `^` / `\A` outside multi-line mode).
    var anchoredStart: Bool
    /// Set when the whole pattern is a case-sensitive literal: matched by byte search instead.
    var literal: [UInt8]?
}
