/// Pike VM simulation of a `RegexProgram`: all NFA threads advance in lock step over the
/// input, each program counter at most once per position, so a search over n bytes costs
/// O(n × program size) time and O(program size) memory, whatever the pattern.
struct PikeVM {
    /// Unanchored search; `steps` counts instruction visits (≤ (n + 1) × (4 × size + 1)).
    static func search(_ program: RegexProgram, _ input: UnsafeRawBufferPointer, steps: inout Int) -> Bool {
        if let literal = program.literal {
            return literalSearch(literal, input, steps: &steps)
        }
        let size = program.insts.count
        let memory = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: 6 * size + 2)
        memory.initialize(repeating: 0)
        defer { memory.deallocate() }
        guard let base = memory.baseAddress else { return false }
        var current = ThreadList(dense: base, sparse: base + size)
        var next = ThreadList(dense: base + 2 * size, sparse: base + 3 * size)
        let stack = base + 4 * size

        return program.insts.withUnsafeBufferPointer { insts in
            program.classes.withUnsafeBufferPointer { classes in
                /// Follows empty-width edges from `pc`, adding every reached pc to `list`.
                /// Returns true as soon as a `match` instruction is reached.
                func addThread(_ pc: UInt32, _ list: inout ThreadList, prev: Int32, cur: Int32) -> Bool {
                    var top = 0
                    stack[top] = pc
                    top += 1
                    while top > 0 {
                        top -= 1
                        let pc = stack[top]
                        steps += 1
                        if list.contains(pc) { continue }
                        list.insert(pc)
                        let inst = insts[Int(pc)]
                        switch inst.op {
                        case .match:
                            return true
                        case .nop:
                            stack[top] = inst.out
                            top += 1
                        case .split:
                            stack[top] = inst.arg
                            stack[top + 1] = inst.out
                            top += 2
                        case .assertion:
                            if let a = Assertion(rawValue: UInt8(truncatingIfNeeded: inst.arg)),
                                PikeVM.holds(a, prev: prev, cur: cur)
                            {
                                stack[top] = inst.out
                                top += 1
                            }
                        default:
                            break
                        }
                    }
                    return false
                }

                var pos = 0
                var prev: Int32 = -1
                var (cur, width) = UTF8Decoding.decode(input, 0)
                while true {
                    if !program.anchoredStart || pos == 0 {
                        if addThread(program.start, &current, prev: prev, cur: cur) { return true }
                    }
                    if current.count == 0 && program.anchoredStart { return false }
                    if cur < 0 { return false }
                    let nextPos = pos + width
                    let (following, followingWidth) = UTF8Decoding.decode(input, nextPos)
                    next.count = 0
                    var k = 0
                    while k < current.count {
                        steps += 1
                        let inst = insts[Int(current.dense[k])]
                        k += 1
                        let ok: Bool
                        switch inst.op {
                        case .scalar: ok = UInt32(cur) == inst.arg
                        case .charClass: ok = classes[Int(inst.arg)].contains(UInt32(cur))
                        case .anyChar: ok = true
                        case .anyCharNotNL: ok = cur != 10
                        default: ok = false
                        }
                        if ok && addThread(inst.out, &next, prev: cur, cur: following) { return true }
                    }
                    swap(&current, &next)
                    prev = cur
                    cur = following
                    width = followingWidth
                    pos = nextPos
                }
            }
        }
    }

    @inline(__always)
    static func isWordChar(_ c: Int32) -> Bool {
        c >= 0 && c < 128 && RegexParser.isWordByte(UInt8(c))
    }

    @inline(__always)
    static func holds(_ a: Assertion, prev: Int32, cur: Int32) -> Bool {
        switch a {
        case .beginText: return prev < 0
        case .endText: return cur < 0
        case .beginLine: return prev < 0 || prev == 10
        case .endLine: return cur < 0 || cur == 10
        case .wordBoundary: return isWordChar(prev) != isWordChar(cur)
        case .notWordBoundary: return isWordChar(prev) == isWordChar(cur)
        }
    }

    /// Byte search for a literal pattern: O(n × m) worst case, with m ≤ program size.
    static func literalSearch(_ needle: [UInt8], _ hay: UnsafeRawBufferPointer, steps: inout Int) -> Bool {
        let m = needle.count
        guard hay.count >= m else { return false }
        let first = needle[0]
        var start = 0
        while start <= hay.count - m {
            steps += 1
            if hay[start] == first {
                var k = 1
                while k < m && hay[start + k] == needle[k] {
                    steps += 1
                    k += 1
                }
                if k == m { return true }
            }
            start += 1
        }
        return false
    }
}
