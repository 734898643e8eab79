import AgentSystem
import Testing

struct EnvironmentBlockTests {
    private func strings(_ environment: [String: String]) -> [String] {
        EnvironmentBlock(environment).withPointers { pointer in
            var result: [String] = []
            var index = 0
            while let entry = pointer[index] {
                result.append(String(cString: entry))
                index += 1
            }
            return result
        }
    }

    @Test func environmentBlockHoldsEveryVariableSortedByKey() {
        #expect(strings([:]).isEmpty)
        #expect(strings(["B": "2", "A": "1", "A_B": "x=y", "EMPTY": "", "UTF": "é😀"]) == ["A=1", "A_B=x=y", "B=2", "EMPTY=", "UTF=é😀"])
        var many: [String: String] = [:]
        for index in 0..<500 { many["VAR_\(index)"] = String(repeating: "v", count: index) }
        let block = strings(many)
        #expect(block.count == 500)
        let expected: [String] = many.sorted { $0.key < $1.key }.map { entry in entry.key + "=" + entry.value }
        #expect(block == expected)
    }

    @Test func cachedBlockIsReusedOnlyForTheSameVariables() {
        let cache = EnvironmentBlock.Cache()
        let first = cache.block(for: ["A": "1", "B": "2"])
        #expect(cache.block(for: ["B": "2", "A": "1"]) === first)
        let changed = cache.block(for: ["A": "1", "B": "3"])
        #expect(changed !== first)
        #expect(changed.environment == ["A": "1", "B": "3"])
        // Canonically equal to Swift, different bytes: a new block with the bytes asked for.
        let composed = cache.block(for: ["P": "caf\u{E9}"])
        let decomposed = cache.block(for: ["P": "cafe\u{301}"])
        #expect(decomposed !== composed)
        #expect(Array(strings(["P": "cafe\u{301}"])[0].utf8) == Array("P=cafe\u{301}".utf8))
        #expect(decomposed.withPointers { Array(String(cString: $0[0]!).utf8) } == Array("P=cafe\u{301}".utf8))
    }
}
