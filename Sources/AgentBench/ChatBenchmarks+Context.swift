import AgentCore
import AgentProto
import ArgumentParser
import ChatContext
import ControlPlaneDouble
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension ChatBench {
    /// How long one write may take to reach the double before the part gives up.
    static let pushDeadline: Duration = .seconds(10)
    /// Quiet time after each recorded push, so the next write starts a burst of its own.
    static let pushSettle: UInt32 = 300_000

    /// 2. The agent connected to the control-plane double, its start phase over (the first
    /// push recorded): each round writes a changed `AGENTS.md` (an atomic rename, as editors
    /// save) and times until the double has a push carrying the new content. Baseline: the
    /// watcher's trailing debounce, which every such push waits out.
    func push(count: Int) async throws {
        let home = try directory("push-home"), workdir = try directory("push-home/project"), dir = try directory("push")
        let agentsFile = workdir + "/AGENTS.md"
        try "# Project rules\nround 0\n".write(toFile: agentsFile, atomically: true, encoding: .utf8)
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.directory = workdir
        let double = ControlPlaneDouble(manifest: manifest)
        let token = dir + "/token"
        try double.token.write(toFile: token, atomically: true, encoding: .utf8)
        let binary = self.binary, env = environment(home: home)
        let log = dir + "/agent.log"
        let recorded = Mutex<[Double]>([])
        try await double.run { url in
            let pid = Bench.spawn(
                [
                    binary, "--http-address", "127.0.0.1:\(Bench.freePort())", "--state-dir", dir + "/state", "--log-level", "warning",
                    "--prometheus-address", "", "--socket-server-enabled", "false", "--agent-url", url, "--agent-token-file", token,
                    "--script-data-dir", dir, "--log-dir", dir, "--tailnet", "false", "--boundary-log-proxy-socket-path", "",
                ],
                stdoutPath: log, environment: env)
            defer {
                kill(pid, SIGTERM)
                _ = Bench.wait(pid)
            }
            // The first push follows the end of the start phase.
            guard Self.waitUntil(.seconds(60), { !double.contextState.withLock { $0.pushes.isEmpty } }) else {
                throw ValidationError("no first push from the agent (log: \(log))")
            }
            usleep(Self.pushSettle)
            for round in 1...count {
                let content = Data("# Project rules\nround \(round) of the push benchmark\n".utf8)
                let start = Bench.now()
                try content.write(to: URL(fileURLWithPath: agentsFile), options: .atomic)
                let arrived = Self.waitUntil(Self.pushDeadline) {
                    double.contextState.withLock { state in
                        state.pushes.last?.resources.contains { $0.instructionFile.content == content } ?? false
                    }
                }
                guard arrived else { throw ValidationError("round \(round): no push within \(Self.pushDeadline) (log: \(log))") }
                recorded.withLock { $0.append(Double(Bench.now() - start)) }
                usleep(Self.pushSettle)
            }
            let rejections = double.contextState.withLock { $0.rejections }
            if !rejections.isEmpty { print("push: the double refused \(rejections.count) push(es): \(rejections[0])") }
        }
        let samples = recorded.withLock { $0 }
        let debounce = TrailingDebounce.standardDelay / .nanoseconds(1)
        let median = Bench.median(samples), worst = samples.max() ?? 0
        print("push: \(samples.count) AGENTS.md writes, each until the double records the push carrying it (\(Self.pushSettle / 1000) ms apart)")
        report(
            "AGENTS.md write -> push (median)", value: Bench.format(median), baseline: Bench.format(debounce),
            ratio: median / debounce, goal: "< 400 ms including the debounce (baseline: the 250 ms debounce)", met: median < 400e6)
        report(
            "AGENTS.md write -> push (max)", value: Bench.format(worst), baseline: Bench.format(debounce),
            ratio: worst / debounce, goal: "< 400 ms", met: worst < 400e6)
        report(
            "  above the debounce (median)", value: Bench.format(median - debounce), baseline: Bench.format(debounce),
            ratio: (median - debounce) / debounce, goal: "< 150 ms", met: median - debounce < 150e6)
    }

    /// Polls `condition` every 0.5 ms until it holds or `limit` passes; whether it held.
    static func waitUntil(_ limit: Duration, _ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if condition() { return true }
            usleep(500)
        }
        return condition()
    }

    /// Skills in the resolve's tree (spread over the four skills containers of one root).
    static let resolveSkills = 480
    /// Instruction files in the resolve's tree (the three names in each of seven roots, one short).
    static let resolveInstructions = 20

    /// 3. ``ContextResolver`` over a tree of 500 resources (480 skills, 20 instruction files
    /// in 7 roots), in process, against opening, reading and closing the same 500 files;
    /// alternating, medians. Each full resolve has a resolver of its own (nothing cached);
    /// the same tree resolved again by one resolver, nothing changed, is reported beside it.
    func resolve(runs: Int) throws {
        let (roots, files) = try resolveTree()
        let check = ContextResolver().resolve(roots: roots)
        let ok = check.resources.filter { $0.status == .ok }.count
        guard ok == files.count, check.snapshotError.isEmpty else {
            throw ValidationError("the resolve found \(ok) OK resources of \(files.count) (\(check.snapshotError))")
        }
        let warm = ContextResolver()
        var resolveTimes: [Double] = [], readTimes: [Double] = [], warmTimes: [Double] = []
        var sink = warm.resolve(roots: roots).resources.count
        for round in 0..<(runs + 3) {
            let r0 = Bench.now()
            sink &+= ContextResolver().resolve(roots: roots).resources.count
            let resolved = Double(Bench.now() - r0)
            let b0 = Bench.now()
            sink &+= Self.readAll(files)
            let read = Double(Bench.now() - b0)
            let w0 = Bench.now()
            sink &+= warm.resolve(roots: roots).resources.count
            let again = Double(Bench.now() - w0)
            // The first three of each are warm-up.
            if round >= 3 {
                resolveTimes.append(resolved)
                readTimes.append(read)
                warmTimes.append(again)
            }
        }
        let (resolveMedian, readMedian, warmMedian) = (Bench.median(resolveTimes), Bench.median(readTimes), Bench.median(warmTimes))
        print("resolve: \(files.count) resources (\(Self.resolveSkills) skills, \(Self.resolveInstructions) instruction files, \(roots.count) roots, \(Bench.mib(Self.totalSize(files)))), \(runs) runs per side alternating (medians) [\(sink % 2)]")
        report(
            "full resolve, 500 resources (median)", value: Bench.format(resolveMedian), baseline: Bench.format(readMedian),
            ratio: resolveMedian / readMedian, goal: "reported (baseline: open/read/close of the same files)", met: true)
        report(
            "  per resource", value: Bench.format(resolveMedian / Double(files.count)), baseline: Bench.format(readMedian / Double(files.count)),
            ratio: resolveMedian / readMedian, goal: "(information)", met: true)
        report(
            "  again, nothing changed (median)", value: Bench.format(warmMedian), baseline: Bench.format(readMedian),
            ratio: warmMedian / readMedian, goal: "(information: the same resolver, its cache warm)", met: true)
    }

    /// Opens, reads (64 KiB at a time) and closes each file: the floor of any resolve that
    /// reads them all. Returns the bytes read.
    static func readAll(_ files: [String]) -> Int {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var total = 0
        for path in files {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            while true {
                let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                total += n
            }
            close(fd)
        }
        return total
    }

    /// The files' sizes added up.
    static func totalSize(_ files: [String]) -> Int {
        files.reduce(0) { total, path in
            var info = stat()
            return total + (stat(path, &info) == 0 ? Int(info.st_size) : 0)
        }
    }

    /// Skills in the large-skills tree, and each one's `SKILL.md` size (inside every cap).
    static let largeSkills = 1000
    static let largeSkillBytes = 63 * 1024

    /// 4. 1 000 skills whose `SKILL.md` is 63 KiB each: a cold resolve (a new resolver, goal
    /// ≤ 1 s) and, with one resolver kept, a resolve after one `SKILL.md` is rewritten (goal
    /// ≤ 50 ms); both against opening, reading and closing the same 1 000 files.
    func largeSkills(coldRuns: Int, changes: Int) throws {
        let (root, files) = try largeSkillTree()
        let roots = [ContextScanRoot(path: root)]
        func description(_ snapshot: ContextSnapshot, of name: String) -> String? {
            snapshot.resources.first { $0.kind == .skill && $0.name == name }?.description
        }
        let check = ContextResolver().resolve(roots: roots)
        guard check.resources.filter({ $0.kind == .skill && !$0.name.isEmpty }).count == files.count else {
            throw ValidationError("the resolve named \(check.resources.filter { !$0.name.isEmpty }.count) skills of \(files.count) (\(check.snapshotError))")
        }
        var coldTimes: [Double] = [], readTimes: [Double] = []
        var sink = 0
        for _ in 0..<coldRuns {
            let r0 = Bench.now()
            sink &+= ContextResolver().resolve(roots: roots).resources.count
            coldTimes.append(Double(Bench.now() - r0))
            let b0 = Bench.now()
            sink &+= Self.readAll(files)
            readTimes.append(Double(Bench.now() - b0))
        }
        let kept = ContextResolver()
        sink &+= kept.resolve(roots: roots).resources.count
        var changeTimes: [Double] = []
        for round in 1...changes {
            let number = (round * 397) % files.count
            let name = String(format: "skill-%04d", number)
            try Self.largeSkill(name, revision: round).write(toFile: files[number], atomically: false, encoding: .utf8)
            let start = Bench.now()
            let snapshot = kept.resolve(roots: roots)
            changeTimes.append(Double(Bench.now() - start))
            guard description(snapshot, of: name)?.hasSuffix("revision \(round).") == true else {
                throw ValidationError("round \(round): the resolve did not see the change to \(files[number])")
            }
            let b0 = Bench.now()
            sink &+= Self.readAll(files)
            readTimes.append(Double(Bench.now() - b0))
        }
        let (cold, read, change) = (Bench.median(coldTimes), Bench.median(readTimes), Bench.median(changeTimes))
        let worst = changeTimes.max() ?? 0
        print("skills: \(files.count) skills of \(Self.largeSkillBytes / 1024) KiB (\(Bench.mib(Self.totalSize(files)))) in one container; \(coldRuns) cold resolves, \(changes) one-file changes (medians) [\(sink % 2)]")
        report(
            "1000 skills of 63 KiB, cold resolve", value: Bench.format(cold), baseline: Bench.format(read),
            ratio: cold / read, goal: "<= 1 s (baseline: open/read/close of the same files)", met: cold <= 1e9)
        report(
            "  one SKILL.md changed (median)", value: Bench.format(change), baseline: Bench.format(read),
            ratio: change / read, goal: "<= 50 ms", met: change <= 50e6)
        report(
            "  one SKILL.md changed (max)", value: Bench.format(worst), baseline: Bench.format(read),
            ratio: worst / read, goal: "(information)", met: true)
    }

    /// Writes `skills/skill-NNNN/SKILL.md` under a root of its own for each large skill;
    /// returns the root and the files in skill order.
    func largeSkillTree() throws -> (String, [String]) {
        let root = try directory("large-skills")
        var files: [String] = []
        for number in 0..<Self.largeSkills {
            let name = String(format: "skill-%04d", number)
            let path = try directory("large-skills/skills/\(name)") + "/SKILL.md"
            try Self.largeSkill(name, revision: 0).write(toFile: path, atomically: false, encoding: .utf8)
            files.append(path)
        }
        return (root, files)
    }

    /// A `SKILL.md` of exactly ``largeSkillBytes``: front matter, then Markdown (headings,
    /// prose, lists, a code block, an HTML comment), padded with dots to the size.
    static func largeSkill(_ name: String, revision: Int) -> String {
        var text = "---\nname: \(name)\ndescription: \"Deploys the service \(name) and checks it, revision \(revision).\"\nmetadata:\n  owner: platform\n  tags: [deploy, check]\n---\n\n# \(name)\n\n"
        let section = """
            ## Steps

            Read the service's configuration first, then run the checks in the order given below. \
            Keep the change small and explain why it is needed.

            - Build the image with the pinned toolchain.
            - Push it to the staging registry, then wait for the health check.
            - Roll forward one region at a time; stop at the first failed probe.

            ```sh
            make deploy ENV=staging && ./scripts/check --region eu-west-1
            ```

            <!-- maintainers: keep this section in step with the runbook -->


            """
        while text.utf8.count + section.utf8.count <= largeSkillBytes { text += section }
        text += String(repeating: ".", count: largeSkillBytes - text.utf8.count)
        return text
    }
    /// Writes the resolve's tree: root 0 holds the skills (`skills`, `.agents/skills`,
    /// `.claude/skills`, `.codex/skills`, 120 each) and every root its instruction files.
    /// Returns the roots and every file a resolve reads.
    func resolveTree() throws -> ([ContextScanRoot], [String]) {
        let tree = try directory("resolve")
        var roots: [ContextScanRoot] = []
        var files: [String] = []
        let filler = String(repeating: "Keep the change small and explain why it is needed. ", count: 16)
        for index in 0..<7 {
            let root = try directory("resolve/root\(index)")
            roots.append(ContextScanRoot(path: root))
            let names = index < 6 ? ["AGENTS.md", "CLAUDE.md", ".cursorrules"] : ["AGENTS.md", "CLAUDE.md"]
            for name in names {
                let path = root + "/" + name
                try "# Rules of root \(index), \(name)\n\n\(filler)\n".write(toFile: path, atomically: false, encoding: .utf8)
                files.append(path)
            }
        }
        let containers = ["skills", ".agents/skills", ".claude/skills", ".codex/skills"]
        for number in 0..<Self.resolveSkills {
            let name = String(format: "skill-%03d", number)
            let directory = try directory("resolve/root0/\(containers[number % containers.count])/\(name)")
            let path = directory + "/SKILL.md"
            try "---\nname: \(name)\ndescription: Skill \(number) of the resolve benchmark, with a sentence of description.\n---\n\n# \(name)\n\n\(filler)\n"
                .write(toFile: path, atomically: false, encoding: .utf8)
            files.append(path)
        }
        precondition(files.count == Self.resolveSkills + Self.resolveInstructions && tree.hasPrefix(base))
        return (roots, files)
    }
}
