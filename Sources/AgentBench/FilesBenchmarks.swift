import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench files`: a 1 GiB write-file streamed to the agent against `cat > file` fed
/// the same bytes through a pipe (throughput and the agent's RSS growth), and read-file-lines
/// on a 1 MiB file against `/healthz` on the same keep-alive connection.
struct FilesBenchmarks: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "files", abstract: "File API: streamed write, line reads.")

    @Option(help: "Path of the workspace-agent binary (default: next to agent-bench).")
    var agent: String?

    @Option(help: "Bytes per write.") var bytes = 1 << 30
    @Option(help: "read-file-lines requests per side.") var requests = 500

    func run() throws {
        let binary = try Bench.agentBinary(agent)
        let directory = NSTemporaryDirectory() + "agent-bench-files-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let benchmarks = ProcessBenchmarks()
        let port = Bench.freePort()
        let daemon = benchmarks.launch(binary, port: port)
        defer { benchmarks.stop(daemon) }
        guard benchmarks.connectWhenHealthy(port: port) != nil else { throw ValidationError("agent did not answer /healthz") }
        print("agent-bench files: 3 rounds of \(Bench.mib(bytes)) per side, \(requests) line reads per side (medians)")

        let chunk = [UInt8](repeating: 0x61, count: 1 << 20)
        let rssBefore = Bench.rss(daemon)
        let sampler = PeakSampler(pid: daemon)
        sampler.start()
        // Three rounds, each side in turn (this VM's disk and CPU speed drift): medians.
        var agentRates: [Double] = []
        var catRates: [Double] = []
        for _ in 0..<3 {
            let agentNs = try writeThroughAgent(port: port, path: directory + "/through-agent.bin", chunk: chunk)
            try? FileManager.default.removeItem(atPath: directory + "/through-agent.bin")
            let catNs = try writeThroughCat(path: directory + "/through-cat.bin", chunk: chunk)
            try? FileManager.default.removeItem(atPath: directory + "/through-cat.bin")
            agentRates.append(Double(bytes) / (Double(agentNs) / 1e9) / 1048576)
            catRates.append(Double(bytes) / (Double(catNs) / 1e9) / 1048576)
        }
        let peak = sampler.stop()
        let agentRate = Bench.median(agentRates)
        let catRate = Bench.median(catRates)
        report(
            "write-file \(Bench.mib(bytes)) streamed (median)", value: String(format: "%.0f MiB/s", agentRate),
            baseline: String(format: "%.0f MiB/s", catRate), ratio: agentRate / catRate, goal: ">= 0.8x cat > file", met: agentRate / catRate >= 0.8)
        let growth = max(0, peak - rssBefore)
        report(
            "agent RSS growth during the writes", value: Bench.mib(growth), baseline: Bench.mib(rssBefore),
            ratio: Double(growth) / Double(max(1, rssBefore)), goal: "< 8 MiB", met: growth < 8 << 20)

        // A 1 MiB file of 64-byte lines; a window of 400 lines stays under the 32 KiB budget.
        let file = directory + "/lines.txt"
        let line = String(repeating: "x", count: 63) + "\n"
        try Data(String(repeating: line, count: (1 << 20) / 64).utf8).write(to: URL(fileURLWithPath: file))
        let query = "/api/v0/read-file-lines?path=\(file)&offset=5000&limit=400"
        // A connection of its own: one kept idle through the writes would have passed the
        // agent's 10 s head deadline and been closed.
        guard let client = benchmarks.connectWhenHealthy(port: port) else { throw ValidationError("agent did not answer /healthz") }
        guard client.request("GET", query)?.0 == 200 else { throw ValidationError("read-file-lines failed") }
        func rate(_ path: String) -> Double {
            let start = Bench.now()
            for _ in 0..<requests { _ = client.request("GET", path) }
            return Double(requests) / (Double(Bench.now() - start) / 1e9)
        }
        var lineRates: [Double] = []
        var healthRates: [Double] = []
        for _ in 0..<3 {
            lineRates.append(rate(query))
            healthRates.append(rate("/healthz"))
        }
        let lines = Bench.median(lineRates)
        let health = Bench.median(healthRates)
        report(
            "read-file-lines, 1 MiB file (median)", value: String(format: "%.0f req/s", lines), baseline: String(format: "%.0f req/s", health),
            ratio: lines / health, goal: "reported (baseline: /healthz)", met: true)
        try editBenchmarks(client: client, daemon: daemon, directory: directory)
    }

    /// edit-files on a 16 MiB file of short lines: a one-word edit (exact pass) and a
    /// whitespace-forgiving edit whose search is 20 000 lines (the line passes), each against
    /// `sed -i` making the same change (time) and the file's size (the agent's RSS growth).
    func editBenchmarks(client: BlockingHTTP, daemon: pid_t, directory: String) throws {
        let file = directory + "/edit.txt"
        let lineCount = (16 << 20) / 8
        let content = String(repeating: "a = 1;\n", count: lineCount - 1) + "target\n"
        func reset() throws { try Data(content.utf8).write(to: URL(fileURLWithPath: file)) }
        func sed(_ expression: String) throws -> UInt64 {
            try reset()
            let start = Bench.now()
            let pid = Bench.spawn(["/bin/sed", "-i", expression, file])
            _ = Bench.wait(pid)
            return Bench.now() - start
        }
        func edit(_ search: String, _ replacement: String) throws -> (UInt64, Int) {
            try reset()
            let rssBefore = Bench.rss(daemon)
            let sampler = PeakSampler(pid: daemon)
            sampler.start()
            let body = "{\"files\":[{\"path\":\"\(file)\",\"edits\":[{\"old_text\":\"\(search)\",\"new_text\":\"\(replacement)\"}]}]}"
            // A fresh connection per edit: the file resets and sed runs between edits.
            guard let client = BlockingHTTP(port: client.port) else { throw ValidationError("cannot connect") }
            let start = Bench.now()
            guard let (status, answer) = client.request("POST", "/api/v0/edit-files", body: body), status == 200 else {
                throw ValidationError("edit-files failed")
            }
            _ = answer
            let elapsed = Bench.now() - start
            return (elapsed, max(0, sampler.stop() - rssBefore))
        }
        var agentTimes: [Double] = []
        var sedTimes: [Double] = []
        var growth = 0
        for _ in 0..<3 {
            let (ns, grew) = try edit("target", "TARGET")
            agentTimes.append(Double(ns) / 1e6)
            growth = max(growth, grew)
            sedTimes.append(Double(try sed("s/^target$/TARGET/")) / 1e6)
        }
        let agentMs = Bench.median(agentTimes)
        let sedMs = Bench.median(sedTimes)
        report(
            "edit-files one word, 16 MiB file (median)", value: String(format: "%.0f ms", agentMs), baseline: String(format: "%.0f ms sed -i", sedMs),
            ratio: agentMs / sedMs, goal: "<= 1x sed -i", met: agentMs <= sedMs)
        report(
            "agent RSS growth, one-word edit", value: Bench.mib(growth), baseline: Bench.mib(content.utf8.count),
            ratio: Double(growth) / Double(content.utf8.count), goal: "<= 4x the file", met: growth <= 4 * content.utf8.count)

        // The line passes: a 20 000-line search that matches only with trailing whitespace forgiven.
        let window = 20_000
        let search = String(repeating: "a = 1;\\n", count: window - 1) + "target   \\n"
        var fuzzyTimes: [Double] = []
        var fuzzyGrowth = 0
        for _ in 0..<3 {
            let (ns, grew) = try edit(search, "replaced\\n")
            fuzzyTimes.append(Double(ns) / 1e6)
            fuzzyGrowth = max(fuzzyGrowth, grew)
        }
        let fuzzyMs = Bench.median(fuzzyTimes)
        report(
            "edit-files 20 000-line fuzzy search, 16 MiB file (median)", value: String(format: "%.0f ms", fuzzyMs),
            baseline: String(format: "%.0f ms sed -i", sedMs), ratio: fuzzyMs / sedMs, goal: "<= 5x sed -i (one-word edit)", met: fuzzyMs <= 5 * sedMs)
        report(
            "agent RSS growth, fuzzy edit", value: Bench.mib(fuzzyGrowth), baseline: Bench.mib(content.utf8.count),
            ratio: Double(fuzzyGrowth) / Double(content.utf8.count), goal: "<= 8x the file", met: fuzzyGrowth <= 8 * content.utf8.count)
    }

    /// Streams `bytes` to write-file on a fresh connection; ns until the answer.
    func writeThroughAgent(port: Int, path: String, chunk: [UInt8]) throws -> UInt64 {
        guard let fd = Bench.connect(port: port) else { throw ValidationError("cannot connect") }
        defer { close(fd) }
        let head = "POST /api/v0/write-file?path=\(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(bytes)\r\nConnection: close\r\n\r\n"
        let start = Bench.now()
        guard Bench.sendAll(fd, Array(head.utf8)) else { throw ValidationError("send failed") }
        var left = bytes
        while left > 0 {
            let n = min(left, chunk.count)
            guard chunk.withUnsafeBytes({ Bench.sendAll(fd, UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) else { throw ValidationError("send failed") }
            left -= n
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            answer += buffer[0..<n]
        }
        let elapsed = Bench.now() - start
        guard String(decoding: answer.prefix(12), as: UTF8.self).hasSuffix("200") else {
            throw ValidationError("write-file answered: \(String(decoding: answer.prefix(200), as: UTF8.self))")
        }
        return elapsed
    }

    /// The same bytes through a pipe into `sh -c 'cat > path'`; ns until it exited.
    func writeThroughCat(path: String, chunk: [UInt8]) throws -> UInt64 {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw ValidationError("pipe failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
        posix_spawn_file_actions_addclose(&actions, fds[1])
        let argv = ["/bin/sh", "-c", "cat > '\(path)'"]
        let args = argv.map { strdup($0) } + [nil]
        defer { for a in args { free(a) } }
        var pid: pid_t = 0
        let start = Bench.now()
        guard posix_spawn(&pid, "/bin/sh", &actions, nil, args, environ) == 0 else { throw ValidationError("spawn failed") }
        close(fds[0])
        var left = bytes
        while left > 0 {
            let n = min(left, chunk.count)
            guard chunk.withUnsafeBytes({ writeAll(fds[1], UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) else { break }
            left -= n
        }
        close(fds[1])
        _ = Bench.wait(pid)
        return Bench.now() - start
    }

    func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n <= 0 { return false }
            offset += n
        }
        return true
    }
}
