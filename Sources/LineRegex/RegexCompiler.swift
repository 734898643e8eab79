/// Compiles a `RegexNode` tree to a `RegexProgram` (RE2-style fragments with patch lists
/// threaded through the unused `out`/`arg` fields). Recursion depth is bounded by the
/// tree height (≤ `RegexNode.maxHeight`); every visited node emits at least one instruction,
/// so compile work is bounded by `limit` even for nested counted repetitions.
struct RegexCompiler {
    private struct PatchList {
        var head: UInt32 = 0
        var tail: UInt32 = 0
        init() {}
        init(_ slot: UInt32) { head = slot; tail = slot }
    }

    private struct Frag {
        var start: UInt32
        var out: PatchList
    }

    private var insts: [RegexProgram.Inst] = [RegexProgram.Inst(op: .fail, out: 0, arg: 0)]
    private let limit: Int

    private init(limit: Int) {
        self.limit = limit
    }

    static func compile(_ root: RegexNode, classes: [CharClass], limit: Int) throws(LineRegexError) -> RegexProgram {
        var compiler = RegexCompiler(limit: limit)
        let frag = try compiler.compile(root)
        let match = try compiler.emit(.match)
        compiler.patch(frag.out, match)
        return RegexProgram(
            insts: compiler.insts, start: frag.start, classes: classes,
            anchoredStart: RegexCompiler.isAnchoredStart(root),
            literal: RegexCompiler.literalBytes(root))
    }

    private static func isAnchoredStart(_ node: RegexNode) -> Bool {
        var n = node
        // Iterative walk down the first element of concatenations.
        while true {
            switch n.kind {
            case .assertion(.beginText): return true
            case .concat:
                guard let first = n.subs.first else { return false }
                n = first
            default: return false
            }
        }
    }

    private static func literalBytes(_ node: RegexNode) -> [UInt8]? {
        let parts = node.kind == .concat ? node.subs : [node]
        var bytes: [UInt8] = []
        for part in parts {
            guard case .literal(let value) = part.kind, value != 0xFFFD,
                let scalar = Unicode.Scalar(value)
            else { return nil }
            bytes.append(contentsOf: String(scalar).utf8)
        }
        return bytes.isEmpty ? nil : bytes
    }

    private mutating func emit(_ op: RegexProgram.Op, out: UInt32 = 0, arg: UInt32 = 0) throws(LineRegexError) -> UInt32 {
        guard insts.count < limit else { throw LineRegexError.make("pattern too large") }
        insts.append(RegexProgram.Inst(op: op, out: out, arg: arg))
        return UInt32(insts.count - 1)
    }

    private mutating func patch(_ list: PatchList, _ target: UInt32) {
        var head = list.head
        while head != 0 {
            let pc = Int(head >> 1)
            if head & 1 == 0 {
                head = insts[pc].out
                insts[pc].out = target
            } else {
                head = insts[pc].arg
                insts[pc].arg = target
            }
        }
    }

    private mutating func append(_ l1: PatchList, _ l2: PatchList) -> PatchList {
        if l1.head == 0 { return l2 }
        if l2.head == 0 { return l1 }
        let pc = Int(l1.tail >> 1)
        if l1.tail & 1 == 0 { insts[pc].out = l2.head } else { insts[pc].arg = l2.head }
        var result = PatchList()
        result.head = l1.head
        result.tail = l2.tail
        return result
    }

    private mutating func single(_ op: RegexProgram.Op, arg: UInt32 = 0) throws(LineRegexError) -> Frag {
        let pc = try emit(op, arg: arg)
        return Frag(start: pc, out: PatchList(pc << 1))
    }

    private mutating func cat(_ f1: Frag, _ f2: Frag) -> Frag {
        patch(f1.out, f2.start)
        return Frag(start: f1.start, out: f2.out)
    }

    private mutating func join(_ f: Frag?, _ g: Frag) -> Frag {
        guard let f else { return g }
        return cat(f, g)
    }

    private mutating func alt(_ f1: Frag, _ f2: Frag) throws(LineRegexError) -> Frag {
        let pc = try emit(.split, out: f1.start, arg: f2.start)
        return Frag(start: pc, out: append(f1.out, f2.out))
    }

    private mutating func quest(_ f1: Frag) throws(LineRegexError) -> Frag {
        let pc = try emit(.split, out: f1.start)
        return Frag(start: pc, out: append(PatchList(pc << 1 | 1), f1.out))
    }

    private mutating func star(_ f1: Frag) throws(LineRegexError) -> Frag {
        let pc = try emit(.split, out: f1.start)
        patch(f1.out, pc)
        return Frag(start: pc, out: PatchList(pc << 1 | 1))
    }

    private mutating func plus(_ f1: Frag) throws(LineRegexError) -> Frag {
        let pc = try emit(.split, out: f1.start)
        patch(f1.out, pc)
        return Frag(start: f1.start, out: PatchList(pc << 1 | 1))
    }

    private mutating func compile(_ node: RegexNode) throws(LineRegexError) -> Frag {
        switch node.kind {
        case .empty:
            return try single(.nop)
        case .literal(let scalar):
            return try single(.scalar, arg: scalar)
        case .charClass(let index):
            return try single(.charClass, arg: UInt32(index))
        case .anyChar:
            return try single(.anyChar)
        case .anyCharNotNL:
            return try single(.anyCharNotNL)
        case .assertion(let a):
            return try single(.assertion, arg: UInt32(a.rawValue))
        case .concat:
            var f = try compile(node.subs[0])
            for sub in node.subs.dropFirst() {
                let g = try compile(sub)
                f = cat(f, g)
            }
            return f
        case .alternate:
            var f = try compile(node.subs[0])
            for sub in node.subs.dropFirst() {
                let g = try compile(sub)
                f = try alt(f, g)
            }
            return f
        case .star:
            return try star(try compile(node.subs[0]))
        case .plus:
            return try plus(try compile(node.subs[0]))
        case .quest:
            return try quest(try compile(node.subs[0]))
        case .repeat(let minCount, let maxCount):
            if maxCount == 0 { return try single(.nop) }
            let sub = node.subs[0]
            var f: Frag? = nil
            let plain = maxCount == -1 ? max(minCount - 1, 0) : minCount
            for _ in 0..<plain {
                let g = try compile(sub)
                f = join(f, g)
            }
            if maxCount == -1 {
                let g = minCount == 0 ? try star(try compile(sub)) : try plus(try compile(sub))
                f = join(f, g)
            } else {
                for _ in 0..<(maxCount - minCount) {
                    let g = try quest(try compile(sub))
                    f = join(f, g)
                }
            }
            if let f { return f }
            return try single(.nop)
        }
    }
}
