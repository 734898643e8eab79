import AgentCore
import AgentTestSupport
import ChatContext
import Foundation
import Testing

/// The resolver against real directories: discovery, identity, statuses, symlinks, caps.
struct ContextResolverTests {
    func resolve(_ roots: [ContextScanRoot], limits: ContextLimits = .default) -> ContextSnapshot {
        ContextResolver(limits: limits).resolve(roots: roots)
    }

    func byID(_ snapshot: ContextSnapshot) -> [String: ContextResource] {
        Dictionary(uniqueKeysWithValues: snapshot.resources.map { ($0.id, $0) })
    }

    @Test func instructionFilesAndMCPConfigAtTheTopLevelOnly() throws {
        let tree = try TempTree()
        let agents = "\n# Project rules\nUse tabs.\n"
        try tree.write("AGENTS.md", agents)
        try tree.link("CLAUDE.md", to: "AGENTS.md")  // collapses into AGENTS.md
        try tree.write("agents.md", "ignored: case-sensitive")
        try tree.mkdir(".cursorrules")  // a directory with the name: ignored
        try tree.write("sub/AGENTS.md", "ignored: not the top level")
        try tree.write(".mcp.json", #"{"mcpServers": {"a": {"command": "x"}}}"#)
        let snapshot = resolve([ContextScanRoot(path: tree.root)])
        #expect(
            snapshot.resources.map(\.id) == [
                "instruction_file:\(tree.root)/AGENTS.md", "mcp_config:\(tree.root)/.mcp.json",
            ])
        let instruction = snapshot.resources[0]
        #expect(instruction.status == .ok)
        #expect(instruction.payload == Array(agents.utf8))
        #expect(instruction.contentHash == sha256(Array(agents.utf8)))
        #expect(instruction.sizeBytes == UInt64(agents.utf8.count))
        #expect(instruction.description == "Project rules")
        #expect(instruction.sourcePath == nil)
        let config = snapshot.resources[1]
        #expect(config.status == .ok && config.payload.isEmpty && config.sizeBytes > 0)
        #expect(snapshot.payloadBytes == UInt64(agents.utf8.count))
        #expect(snapshot.snapshotError.isEmpty)
    }

    @Test func skillsGoodAndBad() throws {
        let tree = try TempTree()
        try tree.write(".agents/skills/good-skill/SKILL.md", TempTree.skill("good-skill", description: "Deploys."))
        try tree.write(".agents/skills/other/SKILL.md", TempTree.skill("mismatch"))
        try tree.write(".agents/skills/Bad_Name/SKILL.md", TempTree.skill("Bad_Name"))
        try tree.write(".agents/skills/nofront/SKILL.md", "# no front matter\n")
        try tree.write(".agents/skills/empty-dir/README.md", "no SKILL.md: not a skill")
        try tree.write(".agents/skills/loose.md", "a file in the container: ignored")
        try tree.write("elsewhere/linked/SKILL.md", TempTree.skill("linked"))
        try tree.link(".agents/skills/linked", to: "../../elsewhere/linked")  // a linked directory is not a skill dir
        try tree.write("skills/second/SKILL.md", TempTree.skill("second"))
        try tree.write(".claude/skills/good-skill/SKILL.md", TempTree.skill("good-skill", description: "A later copy."))
        let root = tree.root
        let resources = byID(resolve([ContextScanRoot(path: root, userSource: "/declared")]))
        #expect(
            resources.keys.sorted() == [
                "skill:\(root)/.agents/skills/Bad_Name", "skill:\(root)/.agents/skills/good-skill",
                "skill:\(root)/.agents/skills/nofront", "skill:\(root)/.agents/skills/other", "skill:\(root)/skills/second",
            ], "the later good-skill is dropped: the first of a name wins")
        let good = try #require(resources["skill:\(root)/.agents/skills/good-skill"])
        #expect(good.status == .ok && good.name == "good-skill" && good.description == "Deploys.")
        #expect(good.payload == Array(TempTree.skill("good-skill", description: "Deploys.").utf8))
        #expect(good.sourcePath == "/declared")
        #expect(resources["skill:\(root)/.agents/skills/other"]?.error == "front-matter name \"mismatch\" does not match directory \"other\"")
        #expect(resources["skill:\(root)/.agents/skills/Bad_Name"]?.error == "skill name \"Bad_Name\" is not kebab-case")
        let bad = try #require(resources["skill:\(root)/.agents/skills/nofront"])
        #expect(bad.status == .invalid && bad.error == "missing opening frontmatter delimiter" && bad.payload.isEmpty)
        #expect(bad.contentHash == sha256(Array("# no front matter\n".utf8)))
    }

    /// A root named `skills` is a container itself; a lone SKILL.md root is a skill.
    @Test func skillsRootAndFileRoots() throws {
        let tree = try TempTree()
        try tree.write("skills/one/SKILL.md", TempTree.skill("one"))
        try tree.write("solo/SKILL.md", TempTree.skill("solo"))
        try tree.write("notes/AGENTS.md", "notes")
        let snapshot = resolve([
            ContextScanRoot(path: tree.path("skills")), ContextScanRoot(path: tree.path("solo/SKILL.md")),
            ContextScanRoot(path: tree.path("notes/AGENTS.md")), ContextScanRoot(path: tree.path("missing")),
        ])
        #expect(
            snapshot.resources.map(\.id) == [
                "instruction_file:\(tree.root)/notes/AGENTS.md", "skill:\(tree.root)/skills/one", "skill:\(tree.root)/solo",
            ])
        #expect(snapshot.resources.allSatisfy { $0.status == .ok })
    }

    @Test func mcpConfigGoodBadAndMixed() throws {
        let tree = try TempTree()
        try tree.write("a/.mcp.json", #"{"mcpServers": {"ok": {"command": "x"}, "a__b": {"command": "y"}, "s": "no"}}"#)
        try tree.write("b/.mcp.json", "{not json")
        try tree.write("c/.mcp.json", #"{"mcpServers": []}"#)
        let snapshot = resolve(["a", "b", "c"].map { ContextScanRoot(path: tree.path($0)) })
        let resources = byID(snapshot)
        let a = tree.path("a/.mcp.json")
        #expect(resources["mcp_config:\(a)"]?.status == .ok)
        #expect(resources["mcp_config:\(a)#a__b"]?.status == .invalid)
        #expect(resources["mcp_config:\(a)#a__b"]?.error == "server name \"a__b\" contains reserved separator \"__\" or leading/trailing underscore")
        #expect(resources["mcp_config:\(a)#s"]?.error == "server \"s\" must be a JSON object")
        #expect(resources["mcp_config:\(a)#ok"] == nil)
        #expect(resources["mcp_config:\(tree.path("b/.mcp.json"))"]?.status == .invalid)
        #expect(resources["mcp_config:\(tree.path("b/.mcp.json"))"]?.error.hasPrefix("invalid character") == true)
        #expect(
            resources["mcp_config:\(tree.path("c/.mcp.json"))"]?.error
                == "json: cannot unmarshal array into Go struct field mcpConfigFile.mcpServers of type map[string]json.RawMessage")
        #expect(snapshot.resources.count == 5)
        // .mcp.json rows never move the drift hash.
        #expect(snapshot.aggregateHash == ContextSnapshot.aggregateHash(of: []))
    }

    @Test func symlinksInAndOutOfTheRootAndALoop() throws {
        let tree = try TempTree()
        try tree.write("outside/secret", "key")
        try tree.write("root/docs/rules.md", "inside")
        try tree.link("root/AGENTS.md", to: "docs/rules.md")
        try tree.link("root/CLAUDE.md", to: "../outside/secret")
        try tree.link("root/.cursorrules", to: ".cursorrules")  // a loop
        try tree.link("root/.mcp.json", to: "nowhere.json")  // broken
        try tree.write("root/skills/ok/SKILL.md", TempTree.skill("ok"))
        try tree.link("root/skills/esc/SKILL.md", to: "../../../outside/secret")
        try tree.mkdir("root/docs/dir")
        try tree.link("root/skills/dir/SKILL.md", to: "../../docs/dir")
        let root = tree.path("root")
        let resources = byID(resolve([ContextScanRoot(path: root)]))
        let inside = try #require(resources["instruction_file:\(root)/docs/rules.md"], "\(resources.keys.sorted())")
        #expect(inside.status == .ok && inside.payload == Array("inside".utf8), "a link inside the root is followed; its source is the target")
        let escaped = try #require(resources["instruction_file:\(root)/CLAUDE.md"])
        #expect(escaped.status == .invalid)
        #expect(escaped.error == "symlink target \"\(tree.path("outside/secret"))\" escapes scan root \"\(root)\"")
        #expect(escaped.payload.isEmpty && escaped.contentHash == ContextResource.zeroHash)
        let loop = try #require(resources["instruction_file:\(root)/.cursorrules"])
        #expect(loop.status == .unreadable && loop.error == "symlink resolve: EvalSymlinks: too many links")
        let broken = try #require(resources["mcp_config:\(root)/.mcp.json"])
        #expect(broken.status == .unreadable && broken.error.hasPrefix("symlink resolve: "))
        #expect(resources["skill:\(root)/skills/esc"]?.status == .invalid)
        #expect(resources["skill:\(root)/skills/dir"]?.error == "symlink target \"\(root)/docs/dir\" is not a regular file")
        #expect(resources["skill:\(root)/skills/ok"]?.status == .ok)
    }

    /// A file escaping a narrow root is taken from a later, wider root that contains it.
    @Test func aValidOccurrenceReplacesAnEarlierInvalidOne() throws {
        let tree = try TempTree()
        try tree.write("wide/target.md", "rules")
        try tree.link("wide/narrow/AGENTS.md", to: "../target.md")
        try tree.link("wide/AGENTS.md", to: "narrow/AGENTS.md")
        let snapshot = resolve([ContextScanRoot(path: tree.path("wide/narrow")), ContextScanRoot(path: tree.path("wide"))])
        let ids = snapshot.resources.map { "\($0.id) \($0.status.name)" }
        #expect(ids == ["instruction_file:\(tree.path("wide/narrow/AGENTS.md")) invalid", "instruction_file:\(tree.path("wide/target.md")) ok"])
    }

    @Test func perFileCap() throws {
        let tree = try TempTree()
        let big = [UInt8](repeating: UInt8(ascii: "a"), count: 70_000)
        try tree.write("AGENTS.md", bytes: big)
        try tree.write("skills/huge/SKILL.md", bytes: Array(TempTree.skill("huge").utf8) + big)
        let resources = resolve([ContextScanRoot(path: tree.root)]).resources
        #expect(resources.count == 2)
        let file = resources[0]
        #expect(file.status == .oversize && file.payload.isEmpty && file.sizeBytes == 70_000)
        #expect(file.error == "file size 70000 exceeds per-resource cap of 65536 bytes")
        #expect(file.contentHash == sha256(big.prefix(65_536)))
        #expect(resources[1].status == .oversize && resources[1].name.isEmpty)
    }

    @Test func countAndByteCapsInKindSourceOrder() throws {
        let tree = try TempTree()
        try tree.write("AGENTS.md", String(repeating: "x", count: 60))
        for name in ["a", "b", "c", "d"] { try tree.write("skills/\(name)/SKILL.md", TempTree.skill(name)) }
        var limits = ContextLimits()
        limits.resources = 3
        limits.snapshotBytes = 60 + 2 * TempTree.skill("a").utf8.count - 1
        let snapshot = resolve([ContextScanRoot(path: tree.root)], limits: limits)
        let statuses = snapshot.resources.map { "\(lastPathComponent(of: $0.source)) \($0.status.name)" }
        #expect(statuses == ["AGENTS.md ok", "a ok", "b excluded", "c excluded", "d excluded"])
        let byName = Dictionary(uniqueKeysWithValues: snapshot.resources.map { (lastPathComponent(of: $0.source), $0) })
        #expect(byName["b"]?.error == "dropped to fit \(limits.snapshotBytes)-byte aggregate cap")
        #expect(byName["d"]?.error == "dropped to fit 3-resource snapshot count cap")
        #expect(byName["d"]?.payload.isEmpty == true && byName["d"]?.contentHash != ContextResource.zeroHash)
        #expect(snapshot.snapshotError == "snapshot exceeds 3-resource count cap")
        #expect(snapshot.payloadBytes == UInt64(60 + TempTree.skill("a").utf8.count))
    }

    /// 2 000 skills: 500 counted, the listing stops at 1 000, reads stop at 1 000 files.
    @Test(.ownThreads) func aLargeSkillsTreeCostsBoundedWork() throws {
        let tree = try TempTree()
        for index in 0..<2_000 { try tree.write("skills/s\(index)/SKILL.md", TempTree.skill("s\(index)")) }
        let snapshot = resolve([ContextScanRoot(path: tree.root)])
        #expect(snapshot.resources.count == 1_000)
        #expect(snapshot.resources.filter { $0.status == .ok }.count == 500)
        #expect(snapshot.snapshotError == "more than 1000 context files found; the rest are not read")
        var limits = ContextLimits()
        limits.directoryEntries = 100
        let cut = resolve([ContextScanRoot(path: tree.path("skills"))], limits: limits)
        #expect(cut.resources.count == 100)
        #expect(cut.snapshotError == "directory \"\(tree.path("skills"))\" has more than 100 entries; the rest are not read")
    }

    /// The drift hash, computed independently in Python from the rule: per resource sorted
    /// by id, netstrings of id, kind and source, the 32 hash bytes, the status netstring, NUL.
    @Test func aggregateHashMatchesAnIndependentComputation() async throws {
        let tree = try TempTree()
        try tree.write("AGENTS.md", "é rules")
        try tree.write("skills/zed/SKILL.md", TempTree.skill("zed"))
        try tree.write("skills/bad/SKILL.md", "nope")
        try tree.write(".mcp.json", "{}")
        let snapshot = resolve([ContextScanRoot(path: tree.root)])
        let rows = snapshot.resources.map { [$0.id, $0.kind.name, $0.source, SHA256.hexString($0.contentHash), $0.status.name] }
        let input = String(decoding: try JSONSerialization.data(withJSONObject: rows), as: UTF8.self)
        let script = """
            import hashlib, json, sys
            h = hashlib.sha256()
            def ns(s):
                b = s.encode()
                h.update(str(len(b)).encode() + b":" + b)
            for rid, kind, source, digest, status in sorted(json.load(sys.stdin), key=lambda r: r[0].encode()):
                if kind in ("mcp_config", "mcp_server"):
                    continue
                ns(rid); ns(kind); ns(source); h.update(bytes.fromhex(digest)); ns(status); h.update(b"\\0")
            print(h.hexdigest())
            """
        let python = await ChildProgram.run(["python3", "-c", script], input: input)
        #expect(python.status == 0)
        #expect(python.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == SHA256.hexString(snapshot.aggregateHash))
        #expect(snapshot.resources.count == 4)
        // The empty set hashes to sha256 of nothing.
        #expect(
            SHA256.hexString(ContextSnapshot.aggregateHash(of: []))
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func scanRootsAndSourcePaths() throws {
        let tree = try TempTree()
        try tree.mkdir("home/.coder/skills")
        try tree.mkdir("work")
        let fs = PosixContextFileSystem()
        let roots = ContextScanRoots.make(
            workingDirectory: tree.path("work"), home: tree.path("home"),
            userSources: [tree.path("home/.coder"), tree.path("work/extra")], fileSystem: fs)
        #expect(
            roots == [
                ContextScanRoot(path: tree.path("work")), ContextScanRoot(path: tree.path("home/.coder")),
                ContextScanRoot(path: tree.path("home/.coder/skills")),
                ContextScanRoot(path: tree.path("home/.coder"), userSource: tree.path("home/.coder")),
                ContextScanRoot(path: tree.path("work/extra"), userSource: tree.path("work/extra")),
            ])
        #expect(try ContextSourcePath.lexical("  ~/a//b/./c/../d ", home: "/home/u") == "/home/u/a/b/d")
        #expect(throws: ContextSourcePath.Problem("path is empty")) { try ContextSourcePath.lexical(" ", home: "/h") }
        #expect(throws: ContextSourcePath.Problem("path \"rel\" is not absolute")) { try ContextSourcePath.lexical("rel", home: "/h") }
        #expect(throws: ContextSourcePath.Problem("path contains a NUL byte")) { try ContextSourcePath.lexical("/h/a\0b", home: "/h") }
        #expect(throws: ContextSourcePath.Problem("path is longer than 4096 bytes")) {
            try ContextSourcePath.lexical("/" + String(repeating: "a", count: 4096), home: "/h")
        }
        #expect(try ContextSourcePath.lexical("/" + String(repeating: "a", count: 4095), home: "/h").utf8.count == 4096)
        try tree.link("work/out", to: "/etc")
        #expect(throws: ContextSourcePath.Problem("path \"\(tree.path("work/out"))\" is not inside any allowed root")) {
            try ContextSourcePath.checkAddable(tree.path("work/out"), allowedRoots: [tree.path("work")], fileSystem: fs)
        }
        try ContextSourcePath.checkAddable(tree.path("work/new"), allowedRoots: [tree.path("work")], fileSystem: fs)
    }
}
