import AgentTestSupport
import Foundation
import Testing

/// `workspace-agent stat …` run as a real process: the text, table and JSON the reference
/// prints, over fixture trees (`--stat-root`, hidden) and over this machine, and its error
/// texts and exit status.
@Suite(.timeLimit(.minutes(3)))
struct WorkspaceAgentStatCLITests {
    /// A fake `/proc` and `/sys/fs/cgroup`: a two-core host with 8 GiB (6 available), in a
    /// container whose v2 cgroup `/docker/abc` may use 1 GiB and 2 cores and uses 0.5 GiB.
    static func containerTree() throws -> String {
        let root = NSTemporaryDirectory() + "stat-cli-" + UUID().uuidString
        let cgroup = "/sys/fs/cgroup/docker/abc/"
        let files = [
            "/proc/stat": "cpu  100 0 0 900 0 0 0 0 0 0\nbtime 1700000000\n",
            "/proc/cpuinfo": "processor\t: 0\n\nprocessor\t: 1\n",
            "/proc/meminfo": "MemTotal:        8388608 kB\nMemFree:         1048576 kB\nMemAvailable:    6291456 kB\n",
            "/proc/mounts": "/dev/vda / ext4 rw 0 0\n",
            "/proc/1/cgroup": "0::/docker/abc\n",
            "/proc/self/cgroup": "0::/docker/abc\n",
            "/sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
            cgroup + "cpu.max": "200000 100000\n",
            cgroup + "cpu.stat": "usage_usec 5000\n",
            cgroup + "memory.max": "\(1 << 30)\n",
            cgroup + "memory.current": "\(600 << 20)\n",
            cgroup + "memory.stat": "inactive_file \(88 << 20)\n",
        ]
        for (path, text) in files {
            try FileManager.default.createDirectory(
                atPath: root + (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try TestFile.write(root + path, text)
        }
        return root
    }

    static func stat(_ arguments: [String], root: String? = nil) async -> (output: String, status: Int32) {
        await AgentDaemon.command(["stat"] + arguments + (root.map { ["--stat-root", $0] } ?? []))
    }

    @Test func subcommandsPrintTheReferencesText() async throws {
        let root = try Self.containerTree()
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(await Self.stat(["mem"], root: root) == ("0.5/1 GiB (50%)\n", 0))
        #expect(await Self.stat(["mem", "--prefix", "Mi"], root: root) == ("512/1024 MiB (50%)\n", 0))
        #expect(await Self.stat(["mem", "--host"], root: root) == ("2/8 GiB (25%)\n", 0))
        // An unchanged counter: nothing used over the sample.
        #expect(await Self.stat(["cpu"], root: root) == ("0/2 cores (0%)\n", 0))
        #expect(
            await Self.stat(["cpu", "--host", "-o", "json"], root: root)
                == ("{\n  \"total\": 2,\n  \"unit\": \"cores\",\n  \"used\": 0\n}\n", 0))
        #expect(
            await Self.stat(["mem", "-o", "json", "--prefix", "Ki"], root: root)
                == ("{\n  \"total\": 1073741824,\n  \"unit\": \"B\",\n  \"used\": 536870912\n}\n", 0))

        // No limit in the cgroup: used alone.
        try TestFile.write(root + "/sys/fs/cgroup/docker/abc/memory.max", "max\n")
        #expect(await Self.stat(["mem"], root: root) == ("0.5 GiB\n", 0))
    }

    /// `stat cpu|mem|disk` without flags (or with `--host`) are answered before the general
    /// parser is built; on this machine they say what the general path says (the totals and
    /// units; what is used may move between the two runs).
    @Test func theMetadataFormsAnswerAsTheGeneralPathDoes() async {
        func total(_ text: String) -> String {
            let line = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let slash = line.firstIndex(of: "/") else { return String(line.split(separator: " ").last ?? "") }
            return String(line[line.index(after: slash)...].split(separator: "(").first ?? "").trimmingCharacters(in: .whitespaces)
        }
        for (fast, general) in [
            (["cpu"], ["cpu", "-o", "text"]), (["cpu", "--host"], ["cpu", "--host", "-o", "text"]),
            (["mem"], ["mem", "--prefix", "Gi"]), (["mem", "--host"], ["mem", "--host", "-o", "text"]),
            (["disk"], ["disk", "--path", "/"]),
        ] {
            let quick = await Self.stat(fast)
            let full = await Self.stat(general)
            #expect(quick.status == 0 && full.status == 0, "\(fast): \(quick), \(general): \(full)")
            #expect(!total(quick.output).isEmpty && total(quick.output) == total(full.output), "\(fast): \(quick.output) against \(full.output)")
        }
        // Other forms take the general path: its errors in the reference's words.
        #expect(await Self.stat(["disk", "--host"]).status != 0)
    }

    /// In the table's order whatever the order asked, each once (the reference hides the
    /// columns not chosen).
    @Test func theTableShowsTheChosenColumnsInTheTablesOrder() async throws {
        let root = try Self.containerTree()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let table = await Self.stat(["-c", "container memory,host cpu", "-c", "HOST MEMORY,host cpu"], root: root)
        #expect(table.status == 0)
        #expect(
            table.output == """
                HOST CPU        HOST MEMORY    CONTAINER MEMORY  
                0/2 cores (0%)  2/8 GiB (25%)  0.5/1 GiB (50%)   

                """)
        let all = await Self.stat([], root: root)
        #expect(all.output.hasPrefix("HOST CPU        HOST MEMORY    HOME DISK"), "\(all.output)")
        #expect(all.output.contains("0/2 cores (0%)  2/8 GiB (25%)  ") && all.output.hasSuffix("0/2 cores (0%)  0.5/1 GiB (50%)   \n"))

        // JSON: a list of one row, every key present.
        let json = await Self.stat(["-o", "json"], root: root)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [[String: Any]])
        #expect(rows.count == 1 && Set(rows[0].keys) == ["host_cpu", "host_memory", "home_disk", "container_cpu", "container_memory"])
        #expect(json.output.contains("    \"container_memory\": {\n      \"total\": 1073741824,\n      \"unit\": \"B\",\n      \"used\": 536870912\n    }\n  }\n]\n"))
    }

    @Test func outsideAContainerTheContainerFiguresAreMissing() async throws {
        let root = try Self.containerTree()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try TestFile.write(root + "/proc/1/cgroup", "0::/init.scope\n")
        let table = await Self.stat(["-c", "container cpu,container memory"], root: root)
        #expect(table == ("CONTAINER CPU  CONTAINER MEMORY  \n<nil>          <nil>             \n", 0))
        #expect(await Self.stat(["mem"], root: root) == ("2/8 GiB (25%)\n", 0))
        let json = await Self.stat(["-o", "json"], root: root)
        #expect(json.output.contains("\"container_cpu\": null,\n    \"container_memory\": null\n"))
    }

    @Test func errorsAreTheReferencesAndExitOne() async throws {
        let root = try Self.containerTree()
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(await Self.stat(["disk", "/does/not/exist"]) == ("workspace-agent: not found: \"/does/not/exist\"\n", 1))
        #expect(await Self.stat(["disk", "--path", "/does/not/exist"]) == ("workspace-agent: not found: \"/does/not/exist\"\n", 1))
        #expect(
            await Self.stat(["-o", "xml"]) == (
                "workspace-agent: invalid argument \"xml\" for \"-o, --output\" flag: invalid choice: xml, should be one of [table json]\n", 1
            ))
        #expect(
            await Self.stat(["mem", "--prefix", "Pi"]) == (
                "workspace-agent: invalid argument \"Pi\" for \"--prefix\" flag: invalid choice: Pi, should be one of [Ki Mi Gi Ti]\n", 1
            ))
        #expect(await Self.stat(["mem", "-o", "JSON"], root: root) == ("workspace-agent: unknown output format \"JSON\"\n", 1))
        try TestFile.write(root + "/proc/self/cgroup", "1:cpu:/\n")
        #expect(
            await Self.stat(["mem"], root: root) == (
                "workspace-agent: initialize workspace stats collector: get cgroup statter: get current cgroup: no cgroup entry for hierarchy 0 found\n", 1
            ))
        try TestFile.write(root + "/proc/self/cgroup", "0::/docker/abc\n")
        try TestFile.write(root + "/sys/fs/cgroup/docker/abc/memory.current", "garbage")
        #expect(
            await Self.stat(["mem"], root: root) == (
                "workspace-agent: read memory usage: read memory current: parse "
                    + "/sys/fs/cgroup/docker/abc/memory.current: strconv.ParseInt: parsing \"garbage\": invalid syntax\n", 1
            ))
    }

    /// A reading that failed two ways (cgroup v1's two CPU paths) prints both, as the
    /// reference's multi-error does, not only its first line.
    @Test func anErrorOfSeveralLinesIsPrintedWhole() async throws {
        let root = try Self.containerTree()
        defer { try? FileManager.default.removeItem(atPath: root) }
        // No cgroup.controllers: the v1 hierarchy, whose CPU files are missing.
        unlink(root + "/sys/fs/cgroup/cgroup.controllers")
        let outcome = await Self.stat(["cpu"], root: root)
        #expect(outcome.status == 1)
        let lines = outcome.output.split(separator: "\n", omittingEmptySubsequences: true)
        #expect(outcome.output.hasPrefix("workspace-agent: ") && outcome.output.contains("2 errors occurred:"), "\(outcome.output)")
        #expect(lines.filter { $0.hasPrefix("\t* ") }.count == 2, "\(outcome.output)")
    }

    @Test func thisMachinesFiguresAreWellFormed() async throws {
        let disk = await Self.stat(["disk", "-o", "json", "--path", "/"])
        #expect(disk.status == 0)
        let figure = try #require(try JSONSerialization.jsonObject(with: Data(disk.output.utf8)) as? [String: Any])
        #expect(figure["unit"] as? String == "B")
        #expect(((figure["total"] as? NSNumber)?.doubleValue ?? 0) >= ((figure["used"] as? NSNumber)?.doubleValue ?? -1))
        let memory = await Self.stat(["mem", "--host"])
        #expect(memory.status == 0 && memory.output.contains(" GiB (") && memory.output.hasSuffix("%)\n"), "\(memory.output)")
        let text = await Self.stat(["cpu", "--host"])
        #expect(text.status == 0 && text.output.contains(" cores ("), "\(text.output)")
    }
}
