import Foundation
import FuzzTargets
import Testing

/// Every fuzz target, run by the suite without libFuzzer: its seeds (Fuzz/Seeds/<target>),
/// then mutations of them from a seeded generator, through the same function libFuzzer
/// calls. A broken invariant traps and fails the run, naming it. `make fuzz` (libFuzzer,
/// coverage-guided, with AddressSanitizer) goes much further; this keeps every target
/// building and its invariants holding on every `make test`, without a second build of the
/// whole package with sanitizers.
struct FuzzReplayTests {
    /// Mutated inputs per target: 1000, or `FUZZ_REPLAY_MUTATIONS` for a deeper replay.
    static let mutations = ProcessInfo.processInfo.environment["FUZZ_REPLAY_MUTATIONS"].flatMap(Int.init) ?? 1000

    /// Where each input is written before it runs, when `FUZZ_REPLAY_LAST` names a folder
    /// (`<target>` in it): after a trap, the input that caused it, to replay or keep as a seed.
    static let lastInputFolder = ProcessInfo.processInfo.environment["FUZZ_REPLAY_LAST"]

    /// The targets replayed: all, or those `FUZZ_REPLAY_TARGETS` names (comma-separated).
    static let only = ProcessInfo.processInfo.environment["FUZZ_REPLAY_TARGETS"].map { Set($0.split(separator: ",").map(String.init)) }

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The target's seeds; none when it has no folder (its replay starts from random bytes).
    static func seeds(of target: String) throws -> [[UInt8]] {
        let folder = repository.appendingPathComponent("Fuzz/Seeds/\(target)")
        guard FileManager.default.fileExists(atPath: folder.path) else { return [] }
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        return try names.map { Array(try Data(contentsOf: folder.appendingPathComponent($0))) }
    }

    @Test(arguments: FuzzCatalog.targets.map(\.name))
    func seedsAndMutations(of name: String) async throws {
        let target = try #require(FuzzCatalog.target(named: name))
        if let only = Self.only, !only.contains(name) { return }
        let seeds = try Self.seeds(of: name)
        // On a thread of its own: targets that run async code block their caller until it
        // ends, which must not be one of the concurrency pool's few threads.
        let ran = await withCheckedContinuation { (done: CheckedContinuation<Int, Never>) in
            Thread.detachNewThread {
                let keep = Self.lastInputFolder.map { URL(fileURLWithPath: $0).appendingPathComponent(name) }
                let target = { (input: [UInt8]) in
                    if let keep { try? Data(input).write(to: keep) }
                    target(input)
                }
                var mutator = FuzzMutator(seed: name)
                var count = 0
                for seed in seeds {
                    target(seed)
                    count += 1
                }
                var last = seeds.first ?? []
                for round in 0..<Self.mutations {
                    // Mostly a seed's mutation; now and then one of the last mutant, to go deeper.
                    let base = round % 4 == 3 ? last : (seeds.isEmpty ? [] : seeds[mutator.below(seeds.count)])
                    last = mutator.mutate(base, others: seeds)
                    target(last)
                    count += 1
                }
                done.resume(returning: count)
            }
        }
        #expect(ran == seeds.count + Self.mutations)
    }

    /// The catalog names one target per file of Fuzz/Targets/Cases (the Makefile's list
    /// for `make fuzz`), and every seed folder is one of them.
    @Test func everyTargetIsListedAndSeeded() throws {
        let names = Set(FuzzCatalog.targets.map(\.name))
        #expect(names.count == FuzzCatalog.targets.count, "a target is listed twice")
        let cases = try FileManager.default.contentsOfDirectory(
            atPath: Self.repository.appendingPathComponent("Fuzz/Targets/Cases").path
        ).filter { $0.hasPrefix("Fuzz") && $0.hasSuffix(".swift") }.map { String($0.dropLast(".swift".count)) }
        #expect(Set(cases) == names)
        let seeded = try FileManager.default.contentsOfDirectory(
            atPath: Self.repository.appendingPathComponent("Fuzz/Seeds").path
        ).filter { $0.hasPrefix("Fuzz") }
        #expect(Set(seeded).isSubset(of: names))
    }

    /// The replay's inputs change with the round and stay within libFuzzer's length bound.
    @Test func mutationsAreDeterministicAndBounded() {
        var a = FuzzMutator(seed: "FuzzCron", maxLength: 64)
        var b = FuzzMutator(seed: "FuzzCron", maxLength: 64)
        var distinct: Set<[UInt8]> = []
        var input: [UInt8] = Array("0 * * * *".utf8)
        for _ in 0..<500 {
            let next = a.mutate(input, others: [Array(repeating: 0x41, count: 100)])
            #expect(next == b.mutate(input, others: [Array(repeating: 0x41, count: 100)]))
            #expect(next.count <= 64)
            distinct.insert(next)
            input = next
        }
        #expect(distinct.count > 400)
    }
}
